"""Entry point of `python -m spacy_elmo` and the `spacy-elmo` script."""
from ..training.memory import keep_made_kernels
from . import app


def main() -> None:
    keep_made_kernels()  # before any command makes oneDNN's first kernel (training/memory.py)
    app()
