"""Deprecated: moved to ``spacy_elmo.bilm.inference.char_cache``."""
import warnings

from .inference.char_cache import CharCNNCache  # noqa: F401

warnings.warn("spacy_elmo.bilm.char_cache is deprecated; use spacy_elmo.bilm.inference.char_cache", DeprecationWarning, stacklevel=2)
