"""The lab beside the library: what this repository runs to build, measure and ship spacy-elmo's
models, and the check every results file is held to. Not installed with the package (setup.cfg
finds ``spacy_elmo*`` only); run from the checkout, as ``python -m lab.PACKAGE.MODULE``.

- ``records/``: the check every results record is held to, the records of files that gather runs
  and of fixtures, and which inference loop a run took;
- ``corpus/``: the pretraining corpora, the bundled sample and the labelled .spacy files;
- ``campaign/``: the downstream experiment, its reports and plots, the campaign's curves and
  accelerator stages;
- ``reliability/``: parity with the reference outputs, fuzz and soak drivers;
- ``release/``: the shipped model and the packaged pipeline check;
- ``fixtures/``: fixtures made with ELMoForManyLangs' and bilm-tf's own code, in side environments;
- ``environment.py``: the project's environment and its two jobs (``scripts/run.py``).

Nothing here is imported by ``spacy_elmo``; ``tests/test_layering.py`` checks it.
"""
from pathlib import Path

# the checkout the lab runs from (its tests, fixtures, configs and the package beside it)
CHECKOUT = Path(__file__).resolve().parent.parent
