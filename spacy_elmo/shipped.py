"""The English biLM shipped inside the package: the offline default of the `elmo` component.

It was trained with the project's own workflow on open-licence text only; its model card is
``spacy_elmo/models/en_small/MODEL_CARD.md``. Nothing is downloaded, ever.
"""
from pathlib import Path

from .bilm import BiLM
from .io import ModelFileError, load_native

SHIPPED_MODEL_DIR = Path(__file__).parent / "models" / "en_small"


def shipped_model_dir() -> Path:
    """RETURNS (Path): the directory of the shipped English biLM (our safetensors format)."""
    return SHIPPED_MODEL_DIR


def load_shipped_bilm() -> BiLM:
    """Load the shipped English biLM, with an error that says what to do if the package lacks it."""
    path = shipped_model_dir()
    if not (path / "model.safetensors").is_file():
        raise ModelFileError(
            path,
            "the shipped English biLM is not installed with this copy of spacy-elmo; give weights "
            "explicitly ([initialize.components.elmo] options + weights, or model)",
        )
    return load_native(path)
