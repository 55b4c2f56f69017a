"""Deprecated: the shipped biLM's loader lives in ``spacy_elmo.io.loading``."""
import warnings

from .io.loading import SHIPPED_MODEL_DIR, load_shipped_bilm, shipped_model_dir  # noqa: F401

warnings.warn(
    "spacy_elmo.shipped is deprecated; use spacy_elmo.io.loading (load_shipped_bilm, shipped_model_dir)",
    DeprecationWarning,
    stacklevel=2,
)
