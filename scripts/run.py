"""Set up the project's environment if needed, then run the main job or the tests.

    python scripts/run.py main          # the whole project on the bundled sample (spacy project run main)
    python scripts/run.py tests [ARGS]  # the test suite (what CI runs); ARGS go to pytest

Needs only Python with venv and pip, of the version setup.cfg's ``python_requires`` names (an older
one is told which, before anything starts): the work is ``lab/environment.py``'s (standard library
only), run from the checkout this file is in, since the lab is not installed.
"""
import subprocess
import sys
from pathlib import Path

if __name__ == "__main__":
    checkout = Path(__file__).resolve().parent.parent
    sys.exit(subprocess.run([sys.executable, "-m", "lab.environment", *sys.argv[1:]], cwd=checkout).returncode)
