"""Entry point of `python -m spacy_elmo` and the `spacy-elmo` script."""
from . import app


def main() -> None:
    app()
