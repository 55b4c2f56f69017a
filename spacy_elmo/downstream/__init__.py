"""The downstream experiment: spaCy components trained with and without ELMo on fractions of a
labelled corpus (``corpus.py``: the .spacy files; ``runs.py``: train and score each cell;
``report.py``: the table and the plot). The user's project runs it as ``python -m spacy_elmo
downstream-corpus``, ``downstream-train`` and ``downstream-report``."""
from .corpus import convert_fractions
from .lists import comma_list
from .report import write_report
from .runs import run_cells

__all__ = ["comma_list", "convert_fractions", "run_cells", "write_report"]
