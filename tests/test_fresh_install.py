"""What a new user on a fresh machine needs: how to get torch's CPU build, and how CI is checked."""
import re

from .training_runs import ROOT


def test_readme_set_up_installs_the_cpu_build_of_torch_before_the_requirements():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    set_up = readme[readme.index("## Set-up"):]
    cpu = set_up.index("pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu")
    assert cpu < set_up.index("pip install -r requirements.txt")
    assert re.search(r"^torch==2\.13\.0$", (ROOT / "requirements.txt").read_text(encoding="utf-8"), re.MULTILINE)


def test_ci_readme_says_how_a_fresh_machine_is_checked():
    text = (ROOT / ".ci" / "README.md").read_text(encoding="utf-8")
    for command in ("python3 -c 'import spacy'", "git clone", "bash .ci/run", "python -m spacy project run main"):
        assert command in text, command
