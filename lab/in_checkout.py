"""Run ``python -m MODULE ARGS`` from the checkout this file is in, whatever the current directory.

The lab's spaCy project (``lab/project.yml``) runs its commands from ``lab/``, as spaCy runs every
project's commands from the project's folder; its commands name their files relative to the
checkout, as the records they write name them (``spacy_elmo.records.provenance``), and import the lab, which
is not installed. So each of them goes through this file, run by its path:

    python ../lab/in_checkout.py lab.corpus.wide_corpus --datasets assets/datasets --output corpus/wide

runs ``python -m lab.corpus.wide_corpus --datasets assets/datasets --output corpus/wide`` in the
checkout, with the same Python (spaCy's project runner puts its own in place of ``python``).
"""
import importlib.util
import os
import runpy
import sys
from pathlib import Path
from typing import List, Sequence

CHECKOUT = Path(__file__).resolve().parent.parent
USAGE = "usage: python lab/in_checkout.py MODULE [ARGS ...] (runs python -m MODULE ARGS from the checkout)"


def run_in_checkout(argv: Sequence[str]) -> None:
    """Run a module as ``python -m`` would, from the checkout and with it first on the import path.

    argv (Sequence[str]): the module's name, then its arguments.
    RETURNS (None): the module's own exit (``SystemExit``) ends the process.
    """
    if not argv or argv[0].startswith("-"):
        sys.exit(USAGE)
    module, args = argv[0], list(argv[1:])
    os.chdir(CHECKOUT)
    # run by its path, this file put lab/ first on the path, where lab's own folders would shadow
    # top-level names: the checkout takes its place, as `python -m` run there puts it
    sys.path[:] = [str(CHECKOUT), *(p for p in sys.path[1:] if Path(p or ".").resolve() != CHECKOUT / "lab")]
    try:
        found = importlib.util.find_spec(module) is not None
    except ImportError:  # a parent package that is not there
        found = False
    if not found:
        sys.exit(f"no module {module!r} in the checkout ({CHECKOUT}) or the environment\n{USAGE}")
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


def main(argv: List[str]) -> None:
    """The command line: ``python lab/in_checkout.py MODULE [ARGS ...]``."""
    run_in_checkout(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
