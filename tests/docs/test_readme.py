"""The README stays a front page: what the package is, the two commands, a quickstart, the command
line, the headline numbers and the limits, with the details in docs/."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_LINES = 250


def test_the_readme_is_at_most_250_lines():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; move details to docs/"


def test_every_file_the_readme_links_exists():
    text = README.read_text(encoding="utf-8")
    targets = {link.split("#")[0] for link in re.findall(r"\]\(([^)\s]+)\)", text)}
    local = {t for t in targets if t and not re.match(r"[a-z]+://", t)}
    assert local and all((ROOT / t).exists() for t in local), sorted(t for t in local if not (ROOT / t).exists())
