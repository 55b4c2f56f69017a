"""ELMo contextual word vectors for spaCy 3."""
from .bilm import BiLM, BiLMConfig, ScalarMix
from .io import ModelFileError, export_allennlp, load_bilm, save_bilm

__version__ = "0.9.0"

__all__ = ["BiLM", "BiLMConfig", "ModelFileError", "ScalarMix", "export_allennlp", "load_bilm", "save_bilm"]
