"""Model files: the published AllenNLP/bilm-tf pair, our safetensors directory, ELMoForManyLangs
model directories (``efml``), TensorFlow checkpoints and SavedModels (``bilm_tf``), one source
type per format (``sources``: its biLM, its head, its files, language and description), and the one
loader that decides where a biLM comes from (``loading``: ``load_bilm``, and ``locate_bilm`` for
the package's own entry points, which returns a source)."""
from .allennlp import export_allennlp, load_allennlp, read_options
from .bilm_tf import load_bilm_tf
from .efml import load_efml
from .errors import ModelFileError
from .native import bilm_from_bytes, bilm_to_bytes, load_native, save_bilm
from .loading import load_bilm, load_lm_head, locate_bilm
from .sources import ModelSource

__all__ = [
    "ModelFileError",
    "ModelSource",
    "bilm_from_bytes",
    "bilm_to_bytes",
    "export_allennlp",
    "load_allennlp",
    "load_bilm",
    "load_bilm_tf",
    "load_efml",
    "load_lm_head",
    "load_native",
    "locate_bilm",
    "read_options",
    "save_bilm",
]
