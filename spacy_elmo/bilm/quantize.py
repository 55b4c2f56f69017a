"""Deprecated: moved to ``spacy_elmo.bilm.inference.quantize``."""
import warnings

from .inference.quantize import CPU_ONLY, PRECISIONS, ReducedPrecisionLinear, reduce_precision  # noqa: F401

warnings.warn("spacy_elmo.bilm.quantize is deprecated; use spacy_elmo.bilm.inference.quantize", DeprecationWarning, stacklevel=2)
