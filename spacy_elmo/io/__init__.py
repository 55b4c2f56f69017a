"""Model file formats: the published AllenNLP/bilm-tf pair and our safetensors directory."""
from .allennlp import export_allennlp, load_allennlp, read_options
from .errors import ModelFileError
from .native import bilm_from_bytes, bilm_to_bytes, load_native, save_bilm

__all__ = [
    "ModelFileError",
    "bilm_from_bytes",
    "bilm_to_bytes",
    "export_allennlp",
    "load_allennlp",
    "load_native",
    "read_options",
    "save_bilm",
]
