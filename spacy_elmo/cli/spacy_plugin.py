"""Registers the `elmo` command group under `python -m spacy` (entry point ``spacy_cli``)."""
from spacy.cli._util import app as spacy_app

from . import app

spacy_app.add_typer(app, name="elmo")
