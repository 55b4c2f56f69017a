"""How large a model the readers build: the cap on a biLM's parameter bytes, and the parameter
count a configuration implies, computed from the configuration alone (nothing is built).

A file's configuration (options.json, config.json, an EFML architecture, a checkpoint's shapes)
decides how much memory building the model takes; a hostile or damaged one could ask for
gigabytes before a tensor is compared with it. Every reader compares what its files declare with
each other and refuses a model over the cap before it builds one. The cap is a few times the
largest published biLM (the 5.5B model: 374 MB of float32 parameters): 2 GiB, raised with
``$SPACY_ELMO_MAX_MODEL_BYTES`` (bytes, or with a unit: "4GB", "8GiB") or the ``max_model_bytes``
keyword of ``load_bilm``.
"""
import math
import os
import re
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Iterable, Iterator, Optional, Sequence, Union

from ..bilm import BiLMConfig
from .errors import ModelFileError

MAX_MODEL_BYTES_ENV = "SPACY_ELMO_MAX_MODEL_BYTES"
DEFAULT_MAX_MODEL_BYTES = 2 * 2**30
FLOAT32_BYTES = 4
# what a weights file holds beside its values (HDF5 headers and B-trees, a safetensors header)
FILE_OVERHEAD = 4 << 20
# a biLM has dozens of tensors; a configuration declaring thousands is damaged or hostile
MAX_TENSORS = 10_000
# the width of a token's id row at run time (published: 50); no shape shows it
MAX_CHARACTERS_PER_TOKEN = 1000
UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
         "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
_CAP: ContextVar[Optional[int]] = ContextVar("spacy_elmo_max_model_bytes", default=None)


def max_model_bytes() -> int:
    """RETURNS (int): the cap in force: the ``max_model_bytes`` a caller set (``model_bytes_cap``),
    else ``$SPACY_ELMO_MAX_MODEL_BYTES``, else 2 GiB. A setting that is no size is a ValueError
    naming it."""
    set_by_caller = _CAP.get()
    if set_by_caller is not None:
        return set_by_caller
    text = os.environ.get(MAX_MODEL_BYTES_ENV, "").strip()
    return parse_bytes(text, MAX_MODEL_BYTES_ENV) if text else DEFAULT_MAX_MODEL_BYTES


def parse_bytes(text: str, what: str) -> int:
    """A size in bytes from "2147483648", "4GB" or "8 GiB". RETURNS (int): the bytes."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    unit = found.group(2).upper() if found else None
    if found is None or unit not in UNITS:
        raise ValueError(f"{what}={text!r} is not a size in bytes (e.g. 4000000000, 4GB or 4GiB)")
    return int(float(found.group(1)) * UNITS[unit])


@contextmanager
def model_bytes_cap(cap: Optional[int]) -> Iterator[None]:
    """Within the block, refuse models over ``cap`` bytes instead (None: the setting in force)."""
    if cap is not None and cap <= 0:
        raise ValueError(f"max_model_bytes must be a positive number of bytes, not {cap}")
    token = _CAP.set(cap if cap is not None else _CAP.get())
    try:
        yield
    finally:
        _CAP.reset(token)


def parameter_count(config: BiLMConfig, *, words: int = 0, word_dim: int = 0) -> int:
    """The number of parameters ``BiLM(config)`` holds (``tests/io/test_limits.py`` pins it to the
    model's own ``state_dict``), computed from the configuration alone.

    words, word_dim (int): a learned vocabulary's word embedding (ELMoForManyLangs), if any.
    RETURNS (int): the count.
    """
    n, p, dim = config.n_filters, config.projection_dim, config.dim
    encoder = (
        config.n_characters * config.char_embedding_dim + words * word_dim
        + sum(count * (config.char_embedding_dim * width + 1) for width, count in config.filters)
        + config.n_highway * 2 * (n * n + n) + (word_dim + n) * p + p
    )
    layer = 4 * dim * (p + 1) + 4 * dim * p + dim * p
    return encoder + 2 * config.n_layers * layer


def max_file_bytes() -> int:
    """RETURNS (int): the most bytes one model file may hold: twice the cap (a file of float64
    values), and room for headers."""
    return 2 * max_model_bytes() + FILE_OVERHEAD


def tensor_bytes(shapes: Iterable[Sequence[int]], itemsize: int = FLOAT32_BYTES) -> int:
    """RETURNS (int): the bytes tensors of these shapes take (exact integers: no overflow)."""
    return sum(math.prod(int(d) for d in shape) for shape in shapes) * itemsize


def check_model_bytes(nbytes: int, source: Union[str, Path], what: str = "the model's parameters") -> None:
    """Refuse a model whose parameters (or a read) need more than the cap, before anything is built.

    nbytes (int): the bytes it needs.
    source (Union[str, Path]): the user's file that declares them, for the message.
    """
    cap = max_model_bytes()
    if nbytes > cap:
        raise ModelFileError(
            source, f"{what} need {_size(nbytes)} ({nbytes} bytes), more than the cap of {_size(cap)} on a model's "
                    f"size (the largest published biLM needs 374 MB); if you trust this file, raise the cap with "
                    f"{MAX_MODEL_BYTES_ENV}={nbytes} or load_bilm(..., max_model_bytes={nbytes})",
        )


def check_config_size(config: BiLMConfig, source: Union[str, Path], *, words: int = 0, word_dim: int = 0) -> None:
    """``check_model_bytes`` for the float32 parameters ``config`` implies (see ``parameter_count``),
    at most ``MAX_TENSORS`` tensors and ``MAX_CHARACTERS_PER_TOKEN``: checked in constant time,
    before any list of them is made."""
    if config.max_characters_per_token > MAX_CHARACTERS_PER_TOKEN:
        raise ModelFileError(source, f"declares {config.max_characters_per_token} characters per token, more than "
                                     f"{MAX_CHARACTERS_PER_TOKEN}: every token would take that many ids (published "
                                     "models: 50)")
    tensors = 2 * len(config.filters) + 4 * config.n_highway + 6 * config.n_layers + 3
    if tensors > MAX_TENSORS:
        raise ModelFileError(source, f"declares {tensors} tensors ({len(config.filters)} filters, {config.n_highway} "
                                     f"highway layers, {config.n_layers} LSTM layers), more than {MAX_TENSORS}: not a "
                                     "biLM's configuration (a published one has 40)")
    count = parameter_count(config, words=words, word_dim=word_dim)
    check_model_bytes(count * FLOAT32_BYTES, source, f"the {count} parameters it declares")


def check_weights_fit(config: BiLMConfig, held: int, source: Union[str, Path], *, words: int = 0, word_dim: int = 0) -> None:
    """Before a model of ``config``'s size is built: weights already read (bounded by their file)
    must hold exactly the parameters it declares, and it must be under the cap.

    held (int): the parameters the weights hold.
    """
    declared = parameter_count(config, words=words, word_dim=word_dim)
    if held != declared:
        raise ModelFileError(source, f"the weights hold {held} parameters, but the configuration declares a biLM of "
                                     f"{declared}: they do not describe one model")
    check_config_size(config, source, words=words, word_dim=word_dim)


def _size(nbytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} bytes"
