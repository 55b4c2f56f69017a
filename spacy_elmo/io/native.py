"""Our own model directory: ``config.json`` (options + checksum) and ``model.safetensors``.

A biLM with a learned character vocabulary (``BiLM.char_vocab``, an imported ELMoForManyLangs
model) keeps it in config.json under "char_vocab". A biLM with a default vector setting
(``BiLM.vector_setting``) keeps it in ``vectors.json`` beside the weights (``vector_file``), for
those weights only: saving changed weights (fine-tuning) leaves it out, says so once and drops
it from the biLM.

Nothing here unpickles: weights are safetensors, the config is JSON, and the weights'
SHA-256 is checked before they are parsed, so a damaged or swapped file is refused.
"""
import hashlib
import json
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, Optional, Union

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors_bytes
from safetensors.torch import save as save_safetensors_bytes

from ..files import write_atomic
from ..bilm import BiLM, BiLMConfig, CharVocabulary
from .allennlp import config_from_options
from .errors import ModelFileError
from .limits import MAX_MODEL_BYTES_ENV, check_weights_fit, max_file_bytes
from .vector_file import VECTORS_NAME, read_vector_setting, write_vector_setting

PathLike = Union[str, Path]
CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
FORMAT = "spacy-elmo.bilm"
FORMAT_VERSION = 1


def bilm_to_bytes(bilm: BiLM) -> bytes:
    """The weights as safetensors bytes (contiguous CPU float32 copies)."""
    state = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in bilm.state_dict().items()}
    return save_safetensors_bytes(state)


def bilm_from_bytes(
    config: BiLMConfig, data: bytes, *, char_vocab: Optional[CharVocabulary] = None, source: PathLike = "<bytes>"
) -> BiLM:
    """Build a biLM from its config (and learned character vocabulary, if it has one) and
    safetensors bytes, checking names and shapes."""
    try:
        state = load_safetensors_bytes(data)
    except (SafetensorError, ValueError, RuntimeError) as err:
        raise ModelFileError(source, f"not a valid safetensors file ({err})") from err
    words, word_dim = (char_vocab.n_words, char_vocab.word_dim) if char_vocab is not None else (0, 0)
    check_weights_fit(config, sum(value.numel() for value in state.values()), source, words=words, word_dim=word_dim)
    try:
        bilm = BiLM(config, char_vocab=char_vocab)
    except ValueError as err:
        raise ModelFileError(source, str(err)) from err
    expected = bilm.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise ModelFileError(
            source, f"weights do not match the config: missing {missing[:5]}, unexpected {unexpected[:5]}"
        )
    for name, value in state.items():
        if tuple(value.shape) != tuple(expected[name].shape):
            raise ModelFileError(
                source, f"tensor {name!r} has shape {tuple(value.shape)}, config implies {tuple(expected[name].shape)}"
            )
        if not value.is_floating_point():
            raise ModelFileError(source, f"tensor {name!r} has dtype {value.dtype}, not float")
        if not torch.isfinite(value).all():
            raise ModelFileError(source, f"tensor {name!r} holds NaN or infinite values")
    bilm.load_state_dict({k: v.float() for k, v in state.items()})
    return bilm.eval()


def save_bilm(
    bilm: BiLM, path: PathLike, *, extra: Optional[Dict[str, Any]] = None, carry_vector_setting: bool = False,
) -> Path:
    """Write a biLM directory. Files are written under temporary names, fsynced, then renamed.

    path (PathLike): the directory (created if needed).
    extra (Optional[dict]): JSON-serializable metadata stored in config.json under "extra".
    carry_vector_setting (bool): where the biLM's default vector setting names other weights (it was
        chosen before fine-tuning), write it for these weights anyway, its provenance saying so,
        rather than leave it out (``_save_vector_setting``).
    RETURNS (Path): the directory.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    data = bilm_to_bytes(bilm)
    config = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "options": bilm.config.to_options(),
        "weights_sha256": hashlib.sha256(data).hexdigest(),
        "extra": extra or {},
    }
    if bilm.char_vocab is not None:
        config["char_vocab"] = bilm.char_vocab.to_json()
    write_atomic(path / WEIGHTS_NAME, data)
    write_atomic(path / CONFIG_NAME, json.dumps(config, indent=2).encode("utf-8"))
    _save_vector_setting(bilm, path, config["weights_sha256"], carry=carry_vector_setting)
    return path


def _save_vector_setting(bilm: BiLM, path: Path, weights_sha256: str, *, carry: bool = False) -> None:
    setting = bilm.vector_setting
    if setting is not None and setting.weights_sha256 == weights_sha256:
        write_vector_setting(setting, path)
        return
    if setting is not None and carry:  # fine-tuned weights keep the start's setting, saying so
        carried = dict(setting.provenance.get("carried_over") or {})
        provenance = {**setting.provenance, "carried_over": {
            "from_weights_sha256": carried.get("from_weights_sha256", setting.weights_sha256),
            "note": "chosen for the weights fine-tuning started from and kept for these; python -m "
                    "spacy_elmo vectors --model DIR --wic WIC --write chooses anew for them",
        }}
        write_vector_setting(replace(setting, weights_sha256=weights_sha256, provenance=provenance), path)
        return
    if (path / VECTORS_NAME).exists():  # a setting made for the weights this directory held before
        (path / VECTORS_NAME).unlink()
    if setting is not None:  # said once: the setting no longer describes this biLM
        bilm.vector_setting = None
        warnings.warn(
            f"{path}: the biLM's weights changed since its default vectors were chosen ({VECTORS_NAME} names "
            "other weights), so the saved model gives the mean of the layers; give the new weights a "
            "setting of their own (python -m spacy_elmo vectors --model DIR --wic WIC --write chooses one by WiC "
            "accuracy; or a spacy_elmo.bilm.VectorSetting on bilm.vector_setting)"
        )


def read_config(path: PathLike) -> Dict[str, Any]:
    """Read and validate a model directory's config.json."""
    config_path = Path(path) / CONFIG_NAME
    if not Path(path).is_dir():
        raise ModelFileError(path, "model directory not found")
    if not config_path.is_file():
        raise ModelFileError(config_path, f"missing; a spacy-elmo model directory holds {CONFIG_NAME} and {WEIGHTS_NAME}")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise ModelFileError(config_path, f"not valid JSON ({err})") from err
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise ModelFileError(config_path, f"not a spacy-elmo biLM config (expected format {FORMAT!r})")
    if config.get("format_version", 0) > FORMAT_VERSION:
        raise ModelFileError(config_path, "written by a newer spacy-elmo; upgrade the package to read it")
    return config


def load_native(path: PathLike) -> BiLM:
    """Load a biLM directory written by ``save_bilm``. RETURNS (BiLM): in eval mode, on CPU."""
    config = read_config(path)
    try:
        if not isinstance(config.get("options"), dict):
            raise KeyError("options")
        bilm_config = config_from_options(config["options"], Path(path) / CONFIG_NAME)
        char_vocab = None if config.get("char_vocab") is None else CharVocabulary.from_json(config["char_vocab"])
    except (KeyError, ValueError) as err:
        raise ModelFileError(Path(path) / CONFIG_NAME, f"bad options ({err})") from err
    weights_path = Path(path) / WEIGHTS_NAME
    if not weights_path.is_file():
        raise ModelFileError(weights_path, "weights file not found")
    size = weights_path.stat().st_size
    if size > max_file_bytes():  # read whole below: held to the cap on a model's size first
        raise ModelFileError(weights_path, f"{size} bytes, more than a model's weights may hold ({max_file_bytes()}, twice "
                                           f"the cap on a model's size; raise it with {MAX_MODEL_BYTES_ENV})")
    data = weights_path.read_bytes()
    expected = config.get("weights_sha256")
    digest = hashlib.sha256(data).hexdigest()
    if expected is not None and digest != expected:
        raise ModelFileError(weights_path, "checksum mismatch: the file is damaged or was replaced")
    bilm = bilm_from_bytes(bilm_config, data, char_vocab=char_vocab, source=weights_path)
    bilm.vector_setting = read_vector_setting(
        path, weights_sha256=digest, n_layers=bilm_config.n_output_layers, width=bilm_config.output_dim
    )
    return bilm
