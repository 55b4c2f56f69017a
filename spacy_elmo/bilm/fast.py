"""Deprecated: moved to ``spacy_elmo.bilm.inference.fast``."""
import warnings

from .inference.fast import forget_derived_weights, optimize_for_inference  # noqa: F401

warnings.warn("spacy_elmo.bilm.fast is deprecated; use spacy_elmo.bilm.inference.fast", DeprecationWarning, stacklevel=2)
