"""Model files: the published AllenNLP/bilm-tf pair, our safetensors directory, and the one
loader that decides where a biLM comes from (``loading``)."""
from .allennlp import export_allennlp, load_allennlp, read_options
from .errors import ModelFileError
from .native import bilm_from_bytes, bilm_to_bytes, load_native, save_bilm
from .loading import load_bilm, load_shipped_bilm, resolve_bilm, shipped_model_dir

__all__ = [
    "ModelFileError",
    "bilm_from_bytes",
    "bilm_to_bytes",
    "export_allennlp",
    "load_allennlp",
    "load_bilm",
    "load_native",
    "load_shipped_bilm",
    "read_options",
    "resolve_bilm",
    "save_bilm",
    "shipped_model_dir",
]
