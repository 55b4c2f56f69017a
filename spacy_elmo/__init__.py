"""ELMo contextual word vectors for spaCy 3."""
from .bilm import BiLM, BiLMConfig, ScalarMix
from .io import ModelFileError, export_allennlp, load_bilm, save_bilm

__version__ = "0.10.0"

__all__ = [
    "BiLM",
    "BiLMConfig",
    "ElmoLM",
    "ModelFileError",
    "ScalarMix",
    "export_allennlp",
    "load_bilm",
    "load_lm",
    "save_bilm",
]


def __getattr__(name: str):
    # the language model pulls in training/: imported when asked for, so that a pipeline that only
    # embeds (spaCy imports this package for the "elmo" factory) does not pay for it
    if name in ("ElmoLM", "load_lm"):
        from .training import scoring

        return getattr(scoring, name)
    raise AttributeError(f"module 'spacy_elmo' has no attribute {name!r}")
