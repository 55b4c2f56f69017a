"""Set up the project's environment if needed, then run the main job or the tests.

    python scripts/run.py main          # the whole project on the bundled sample (spacy project run main)
    python scripts/run.py tests [ARGS]  # the test suite (what CI runs); ARGS go to pytest

Needs only Python (3.9+) with venv and pip. The first call creates ``.venv`` in the checkout and
installs the CPU build of torch (pinned in requirements.txt) before the rest, so that pip never
pulls the multi-GB CUDA build; later calls reuse it while requirements.txt and the package's
setup files are unchanged (their SHA-256 is kept in ``.venv/spacy-elmo-env.json``). torch comes
from pip's own sources first (a local wheel or mirror, without network) and from PyTorch's CPU
index otherwise (``SPACY_ELMO_TORCH_INDEX`` sets another). Standard library only: this runs
before anything is installed.
"""
import hashlib
import json
import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import List, Sequence

ROOT = Path(__file__).resolve().parent.parent
ENV = ROOT / ".venv"
STAMP = ENV / "spacy-elmo-env.json"
SETUP_FILES = ("requirements.txt", "setup.cfg", "setup.py", "pyproject.toml")
CPU_INDEX = os.environ.get("SPACY_ELMO_TORCH_INDEX", "https://download.pytorch.org/whl/cpu")
COMMANDS = {
    "main": ["-m", "spacy", "project", "run", "main"],
    "tests": ["-m", "pytest", "tests", "-q", "-p", "no:cacheprovider"],
}


def env_python() -> Path:
    return ENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def torch_pin() -> str:
    """The torch requirement of requirements.txt (``torch==X.Y.Z``)."""
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        requirement = line.split("#", 1)[0].strip()
        if requirement.replace(" ", "").startswith("torch=="):
            return requirement.replace(" ", "")
    raise SystemExit("requirements.txt pins no torch==VERSION; the CPU build needs an exact pin")


def fingerprint() -> dict:
    """What the environment was built from: the setup files' SHA-256 and this Python."""
    files = {name: hashlib.sha256((ROOT / name).read_bytes()).hexdigest() for name in SETUP_FILES if (ROOT / name).is_file()}
    return {"python": sys.version.split()[0], "files": files}


def up_to_date() -> bool:
    if not env_python().is_file() or not STAMP.is_file():
        return False
    try:
        return json.loads(STAMP.read_text(encoding="utf-8")) == fingerprint()
    except ValueError:
        return False


def pip(*args: str, check: bool = True) -> bool:
    done = subprocess.run([str(env_python()), "-m", "pip", "--disable-pip-version-check", *args], cwd=ROOT)
    if check and done.returncode != 0:
        raise SystemExit(f"pip {' '.join(args)} failed (exit {done.returncode}); see its output above")
    return done.returncode == 0


def set_up() -> None:
    """Create or refresh .venv: the CPU torch first, then requirements.txt, then the package (editable)."""
    print(f"spacy-elmo: setting up {ENV} (once; later runs reuse it)", file=sys.stderr, flush=True)
    STAMP.unlink(missing_ok=True)
    if not env_python().is_file():
        venv.EnvBuilder(with_pip=True).create(ENV)
    pin = torch_pin()
    # torch alone from pip's own sources first, without any index: a local wheel, no network needed
    # (its dependencies come with requirements.txt below, from wherever pip finds packages)
    if not pip("install", "--quiet", "--no-index", "--no-deps", pin, check=False):
        print(f"spacy-elmo: {pin} not found locally; taking the CPU build from {CPU_INDEX}", file=sys.stderr, flush=True)
        pip("install", "--quiet", pin, "--index-url", CPU_INDEX)
    pip("install", "--quiet", "-r", str(ROOT / "requirements.txt"))
    pip("install", "--quiet", "--no-deps", "-e", str(ROOT))
    STAMP.write_text(json.dumps(fingerprint(), indent=1) + "\n", encoding="utf-8")


def main(argv: Sequence[str]) -> int:
    if not argv or argv[0] not in COMMANDS:
        print("usage: python scripts/run.py {main|tests} [ARGS]", file=sys.stderr)
        return 2
    if not up_to_date():
        set_up()
    command: List[str] = [str(env_python()), *COMMANDS[argv[0]], *argv[1:]]
    return subprocess.run(command, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
