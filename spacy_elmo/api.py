"""Deprecated: ``load_bilm`` lives in ``spacy_elmo.io.loading`` (and is ``spacy_elmo.load_bilm``)."""
import warnings

from .io.loading import DEFAULT_CHAR_CACHE_SIZE, load_bilm  # noqa: F401

warnings.warn(
    "spacy_elmo.api is deprecated; use spacy_elmo.load_bilm (spacy_elmo.io.loading)", DeprecationWarning, stacklevel=2
)
