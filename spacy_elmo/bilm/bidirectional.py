"""Deprecated: moved to ``spacy_elmo.bilm.inference.bidirectional``."""
import warnings

from .inference.bidirectional import LINEARS, pair_directions, paired_weights, run_directions, unpair_directions, packed_positions, gather_running  # noqa: F401

warnings.warn("spacy_elmo.bilm.bidirectional is deprecated; use spacy_elmo.bilm.inference.bidirectional", DeprecationWarning, stacklevel=2)
