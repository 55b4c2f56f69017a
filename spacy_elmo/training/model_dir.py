"""A trained model directory: the biLM in the core format plus the training-only parts.

``config.json`` + ``model.safetensors`` are the plain biLM directory (what
``load_bilm``, the ``elmo`` component and ``convert`` read); ``vocab.txt`` and
``softmax.safetensors`` (checksummed in config.json's "extra") are only needed
to continue language-model training. Where the biLM comes from is decided by
``io.loading.locate_bilm``; only the training-only parts are read here.
"""
import hashlib
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Dict, Optional, Tuple

import torch
from safetensors.torch import save as save_tensors

from ..files import write_atomic
from ..bilm import BiLM
from ..bilm.softmax import WordSoftmax
from ..io import save_bilm
from ..io.lm_head import SOFTMAX_NAME
from ..io.loading import PathLike, locate_bilm
from ..io.native import read_config
from .head import head_vocab
from .lm import LanguageModel
from .vocab import Vocab

# the segment length assumed for a model directory that does not record its training config
DEFAULT_MAX_SENTENCE_TOKENS = 64


def portable(value: Any) -> Any:
    """``value`` (JSON-like) with every absolute path replaced by its file name.

    A model directory travels (it is shipped, packaged, copied between machines): its metadata
    names the files it was trained on, not the directories of the machine that trained it.
    """
    if isinstance(value, dict):
        return {key: portable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [portable(item) for item in value]
    if isinstance(value, str):
        # corpus paths may be comma-separated lists of paths
        parts = value.split(",")
        if any(is_absolute_path(part.strip()) for part in parts):
            return ",".join(_name(part.strip()) if is_absolute_path(part.strip()) else part for part in parts)
    return value


def is_absolute_path(text: str) -> bool:
    """Whether ``text`` is an absolute path on POSIX or Windows (``/a/b``, ``~/a``, ``C:\\a``, ``\\\\host\\a``)."""
    if text.startswith(("~", "\\\\")):
        return True
    return PurePosixPath(text).is_absolute() or PureWindowsPath(text).is_absolute()


def _name(path: str) -> str:
    return PurePosixPath(path.replace("\\", "/")).name


def save_lm(
    lm: LanguageModel,
    vocab: Vocab,
    path: Path,
    *,
    extra: Optional[Dict[str, Any]] = None,
    softmax_dtype: torch.dtype = torch.float32,
) -> Path:
    """Write the biLM directory with the vocabulary and softmax next to it.

    extra (Optional[dict]): metadata for config.json; absolute paths in it are recorded as file
    names only (see ``portable``).
    softmax_dtype (torch.dtype): how the softmax is stored (float16 halves a shipped model's
    training-only part; it is read back into float32).
    A biLM's default vector setting (``BiLM.vector_setting``) is written for its new weights where
    ``extra`` names the weights it was chosen for ("vectors_carried_from": fine-tuning keeps the
    start model's setting, saying so in vectors.json); elsewhere changed weights drop it.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    softmax = {k: v.detach().cpu().to(softmax_dtype).contiguous() for k, v in lm.softmax.state_dict().items()}
    data = save_tensors(softmax)
    write_atomic(path / SOFTMAX_NAME, data)
    vocab.to_disk(path)
    info = {
        **portable(extra or {}),
        "vocab_size": len(vocab),
        "softmax": SOFTMAX_NAME,
        "softmax_sha256": hashlib.sha256(data).hexdigest(),
    }
    # config.json last (inside save_bilm): it names the softmax checksum
    return save_bilm(lm.bilm, path, extra=info, carry_vector_setting=bool(info.get("vectors_carried_from")))


def load_lm_parts(
    start: Optional[PathLike] = None,
    *,
    options: Optional[PathLike] = None,
    weights: Optional[PathLike] = None,
    what: str = "load_lm_parts",
    with_source: bool = False,
) -> Tuple[BiLM, Optional[Vocab], Optional[Dict[str, torch.Tensor]]]:
    """The biLM ``io.loading.locate_bilm`` finds for the arguments (our directory, a pipeline, a
    published pair or name, or with none the shipped biLM) and its head where it has one
    (the source's ``head()``: our directory's vocabulary and softmax, checksum verified, a
    published softmax and vocabulary, a bilm-tf checkpoint's), in training's vocabulary order
    (``head.head_vocab``); without one, the vocabulary our training wrote beside the weights.

    with_source (bool): add the source (``io.sources.ModelSource``: its language, its record) at the end.
    RETURNS (Tuple[BiLM, Optional[Vocab], Optional[Dict[str, torch.Tensor]]]): the biLM, the
        vocabulary or None, and the softmax's float32 state dict or None (and the source).
    """
    source = locate_bilm(start, options=options, weights=weights, what=what)
    bilm = source.load()
    head = source.head()
    if head is not None:
        vocab, softmax = head_vocab(head.check_fits(bilm))
        return (bilm, vocab, softmax, source) if with_source else (bilm, vocab, softmax)
    vocabulary = source.training_vocabulary()
    parts = (bilm, None if vocabulary is None else Vocab.from_disk(vocabulary), None)
    return (*parts, source) if with_source else parts


def load_lm(path: PathLike) -> Tuple[LanguageModel, Vocab]:
    """The language model of a trained directory (biLM with its own softmax), for scoring text:
    ``load_lm_parts`` where a softmax is required.

    RETURNS (Tuple[LanguageModel, Vocab]): the model (full softmax, no dropout) and its vocabulary.
    """
    bilm, vocab, weights = load_lm_parts(path)
    if vocab is None or weights is None:
        raise ValueError(
            f"{path} has no vocab.txt/softmax.safetensors (an imported model?): fine-tune it first to get a softmax"
        )
    softmax = WordSoftmax(len(vocab), bilm.config.projection_dim)
    softmax.load_state_dict(weights)
    return LanguageModel(bilm, softmax), vocab


def trained_max_sentence_tokens(path: Path) -> int:
    """The segment length the model in ``path`` was trained with (its config's [corpus] max_sentence_tokens)."""
    return trained_segment_length(read_config(Path(path)).get("extra", {}))


def trained_segment_length(record: Dict[str, Any]) -> int:
    """The segment length a model was trained with, from what its training recorded (a source's
    ``training_record()``: config.json's extra), the default where it records no training config."""
    trained = record.get("training_config", {})
    return int(trained.get("corpus", {}).get("max_sentence_tokens", DEFAULT_MAX_SENTENCE_TOKENS))
