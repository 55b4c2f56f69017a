"""Deprecated: split between the loader (``spacy_elmo.io.loading``: ``find_bilm_directory``), the
architectures (``bilm_model_config``) and the component (``initial_bilm``, ``record_shape``)."""
import warnings

from .architectures import BILM_ARCHITECTURE as ARCHITECTURE  # noqa: F401
from .architectures import bilm_model_config  # noqa: F401
from .io.loading import PIPELINE_FACTORY as FACTORY  # noqa: F401
from .io.loading import find_bilm_directory  # noqa: F401
from .pipeline import NO_WEIGHTS, initial_bilm, record_shape  # noqa: F401

warnings.warn(
    "spacy_elmo.bilm_source is deprecated; use spacy_elmo.io.loading, spacy_elmo.architectures and spacy_elmo.pipeline",
    DeprecationWarning,
    stacklevel=2,
)
