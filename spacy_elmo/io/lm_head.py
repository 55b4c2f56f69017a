"""Language-model heads: the word softmax (``W`` (V, P), ``b`` (V,)) with the vocabulary that
names its rows, as AllenNLP publishes it and as our model directories keep it.

AllenNLP publishes the softmax of ``original`` and ``original-5.5b`` beside their weights as
``elmo_<shape>_softmax_weights.hdf5``: datasets ``softmax/W`` (V, projection_dim) and
``softmax/b`` (V,), float32, the rows in the order of the training vocabulary
(``vocab-2016-09-10.txt``, 793,471 words; ``vocab-enwiki-news-500000.txt`` for 5.5B), a text
file with one word per line, ``<S>``, ``</S>`` and ``<UNK>`` among them (LAMA's ELMo connector
and SymPatternWSI read these files so). Words are read as bilm-tf's ``Vocabulary`` reads them:
one per line, stripped, a line ``!!!MAXTERMID`` skipped, ids in line order; a blank line inside
the file or a word listed twice is refused (it would leave a row no word names).

Our directories (``pretrain``/``finetune`` output, the shipped ``en_small``) hold the same head as
``vocab.txt`` + ``softmax.safetensors`` (checksummed in config.json). Which head goes with a biLM
is its source's to say (``sources``: ``source.head()``); this module only reads the files, and
imports no other reader, so that every reader (``bilm_tf`` too) can make an ``LMHead``.
Nothing is unpickled; an HDF5 link that reads outside the file is refused.
"""
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_tensors

from ..bilm import BiLM
from ..bilm.chars import BOS_TOKEN, EOS_TOKEN
from ..bilm.softmax import WordSoftmax
from .allennlp import _check_storage, _own_dataset
from .errors import ModelFileError
from .limits import MAX_MODEL_BYTES_ENV, check_model_bytes, max_file_bytes, tensor_bytes
from .native import read_config

PathLike = Union[str, Path]
UNK_TOKEN = "<UNK>"
VOCAB_NAME = "vocab.txt"
SOFTMAX_NAME = "softmax.safetensors"
HDF5_SOFTMAX_NAME = "softmax.hdf5"
# bilm-tf's Vocabulary skips this line (the end marker of the 1B Word Benchmark's vocabulary)
SKIPPED_WORD = "!!!MAXTERMID"
# rows checked for NaN at a time (the published W has 793,471)
CHECK_ROWS = 1 << 16


@dataclass
class LMHead:
    """A biLM's word softmax and the words its rows stand for.

    softmax (WordSoftmax): the weights, full softmax (shared by both directions).
    words (Tuple[str, ...]): row i predicts ``words[i]``.
    source (str): the file(s) it was read from, for messages.
    files (Tuple[Path, ...]): the files it was read from (for records: their digests).
    """

    softmax: WordSoftmax
    words: Tuple[str, ...]
    source: str
    files: Tuple[Path, ...] = ()
    index: Dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.index = {word: i for i, word in enumerate(self.words)}
        missing = [t for t in (BOS_TOKEN, EOS_TOKEN, UNK_TOKEN) if t not in self.index]
        if missing:
            raise ModelFileError(self.source, f"the vocabulary lacks {', '.join(missing)}; a biLM's softmax vocabulary has all three")
        if self.softmax.n_classes != len(self.words):
            raise ModelFileError(self.source, f"{self.softmax.n_classes} softmax rows for {len(self.words)} words")

    def __len__(self) -> int:
        return len(self.words)

    @property
    def unk(self) -> int:
        return self.index[UNK_TOKEN]

    def ids(self, tokens: Sequence[str]) -> List[int]:
        """RETURNS (List[int]): each token's row, ``<UNK>``'s for a word outside the vocabulary."""
        return [self.index.get(t, self.unk) for t in tokens]

    def check_fits(self, bilm: BiLM) -> "LMHead":
        """Refuse a head whose rows are not as wide as the biLM's top layer (per direction).
        RETURNS (LMHead): itself."""
        width = self.softmax.weight.shape[1]
        if width != bilm.config.projection_dim:
            raise ModelFileError(
                self.source, f"softmax rows of width {width}, but the biLM's projection_dim is "
                f"{bilm.config.projection_dim}: this head belongs to another model"
            )
        return self


def read_head_vocabulary(path: PathLike) -> List[str]:
    """The words of a softmax vocabulary file in row order (see the module docstring).

    RETURNS (List[str]): one word per row.
    """
    path = Path(path)
    if not path.is_file():
        raise ModelFileError(path, "vocabulary file not found")
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except UnicodeDecodeError as err:
        raise ModelFileError(path, f"not UTF-8 text ({err})") from err
    while lines and not lines[-1].strip():
        lines.pop()
    words: List[str] = []
    seen: Dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        word = line.strip()
        if word == SKIPPED_WORD:
            continue
        if not word:
            raise ModelFileError(path, f"line {number} is blank: every line names one softmax row")
        if word in seen:
            raise ModelFileError(path, f"{word!r} on lines {seen[word]} and {number}: a word names one row only")
        seen[word] = number
        words.append(word)
    return words


def read_softmax_hdf5(path: PathLike, n_words: int) -> WordSoftmax:
    """The published softmax (``softmax/W``, ``softmax/b``) for a vocabulary of ``n_words``.

    RETURNS (WordSoftmax): float32, on CPU.
    """
    import h5py

    path = Path(path)
    if not path.is_file():
        raise ModelFileError(path, "softmax weights file not found")
    try:
        handle = h5py.File(path, "r")
    except OSError as err:
        raise ModelFileError(path, f"not a readable HDF5 file, perhaps truncated or damaged ({err})") from err
    with handle:
        datasets = {}
        for name in ("softmax/W", "softmax/b"):
            dataset = _own_dataset(handle, name, path)
            if dataset is None:
                raise ModelFileError(path, f"dataset {name!r} is missing; is this a published *_softmax_weights.hdf5?")
            if dataset.dtype.kind != "f":
                raise ModelFileError(path, f"dataset {name!r} has dtype {dataset.dtype}, not float")
            datasets[name] = dataset
        # what the file declares, held to the vocabulary, the cap and the file's own bytes before a value is read
        weight_shape, bias_shape = tuple(datasets["softmax/W"].shape), tuple(datasets["softmax/b"].shape)
        if len(weight_shape) != 2 or weight_shape[0] != n_words or bias_shape != (n_words,):
            raise ModelFileError(
                path, f"softmax/W {weight_shape} and softmax/b {bias_shape} do not fit a vocabulary of "
                f"{n_words} words (expected ({n_words}, projection_dim) and ({n_words},)): is it the vocabulary "
                "this softmax was trained with?"
            )
        check_model_bytes(tensor_bytes([weight_shape, bias_shape]), path, "the softmax's weights")
        size = path.stat().st_size
        for name, dataset in datasets.items():
            _check_storage(dataset, name, path, size)
        try:
            weight, bias = (np.asarray(datasets[name][...], dtype=np.float32) for name in ("softmax/W", "softmax/b"))
        except OSError as err:
            raise ModelFileError(path, f"the softmax cannot be read ({err})") from err
    return _softmax(weight, bias, path)


def _softmax(weight: np.ndarray, bias: np.ndarray, path: PathLike) -> WordSoftmax:
    for start in range(0, weight.shape[0], CHECK_ROWS):
        if not np.isfinite(weight[start : start + CHECK_ROWS]).all():
            raise ModelFileError(path, "the softmax weights hold NaN or infinite values")
    if not np.isfinite(bias).all():
        raise ModelFileError(path, "the softmax bias holds NaN or infinite values")
    return WordSoftmax.from_weights(torch.from_numpy(weight), torch.from_numpy(bias)).eval()


def read_native_softmax(directory: PathLike, n_words: int) -> Dict[str, torch.Tensor]:
    """Our directory's ``softmax.safetensors``, its checksum verified against config.json.

    RETURNS (Dict[str, torch.Tensor]): ``weight`` (n_words, P) and ``bias``, float32.
    """
    path = Path(directory) / SOFTMAX_NAME
    if path.stat().st_size > max_file_bytes():
        raise ModelFileError(path, f"holds {path.stat().st_size} bytes, more than a softmax under the cap on a "
                                   f"model's size may ({max_file_bytes()}); raise {MAX_MODEL_BYTES_ENV} if you trust it")
    _check_native_softmax_shape(path, n_words)
    data = path.read_bytes()
    extra = read_config(directory).get("extra", {})
    if extra.get("softmax_sha256") not in (None, hashlib.sha256(data).hexdigest()):
        raise ModelFileError(path, "checksum mismatch: the file is damaged or was replaced")
    try:
        tensors = load_tensors(data)
    except (SafetensorError, ValueError, RuntimeError) as err:
        raise ModelFileError(path, f"not a valid safetensors file ({err})") from err
    if tensors.get("weight") is None or tensors["weight"].shape[0] != n_words:
        raise ModelFileError(path, f"softmax does not match {VOCAB_NAME} ({n_words} words)")
    return {name: tensor.float() for name, tensor in tensors.items()}


def _check_native_softmax_shape(path: Path, n_words: int) -> None:
    """That the header of ``softmax.safetensors`` declares a (n_words, P) weight, before its bytes are read."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as handle:
            shape = tuple(handle.get_slice("weight").get_shape()) if "weight" in handle.keys() else None
    except (SafetensorError, OSError, ValueError, RuntimeError) as err:
        raise ModelFileError(path, f"not a valid safetensors file ({err})") from err
    if shape is None or len(shape) != 2 or shape[0] != n_words:
        raise ModelFileError(path, f"softmax weight {shape} does not match {VOCAB_NAME} ({n_words} words)")


def load_published_head(softmax: PathLike, vocabulary: PathLike) -> LMHead:
    """A published head from its two files. RETURNS (LMHead): the softmax in row order of the vocabulary."""
    words = read_head_vocabulary(vocabulary)
    weights = read_softmax_hdf5(softmax, len(words))
    return LMHead(weights, tuple(words), f"{softmax} + {vocabulary}", (Path(softmax), Path(vocabulary)))


def load_native_head(directory: PathLike) -> Optional[LMHead]:
    """The head of our model directory, or None where it has no ``softmax.safetensors``."""
    directory = Path(directory)
    if not ((directory / VOCAB_NAME).is_file() and (directory / SOFTMAX_NAME).is_file()):
        return None
    words = read_head_vocabulary(directory / VOCAB_NAME)
    tensors = read_native_softmax(directory, len(words))
    if set(tensors) != {"weight", "bias"} or tensors["bias"].shape != (len(words),) or tensors["weight"].ndim != 2:
        raise ModelFileError(directory / SOFTMAX_NAME, "not a softmax: expected weight (V, P) and bias (V,)")
    softmax = WordSoftmax.from_weights(tensors["weight"], tensors["bias"]).eval()
    return LMHead(softmax, tuple(words), str(directory), (directory / VOCAB_NAME, directory / SOFTMAX_NAME))


def write_published_head(head: LMHead, folder: PathLike) -> Tuple[Path, Path]:
    """Write a head as bilm-tf published its models': ``softmax.hdf5`` (``softmax/W`` (V, P),
    ``softmax/b`` (V,), float32) and ``vocab.txt`` (one word a row, in row order), which
    ``find_head_files`` finds beside a published pair. AllenNLP does not read them (its format
    has no softmax); bilm-tf's and our scoring and fine-tuning do.

    RETURNS (Tuple[Path, Path]): the softmax file and the vocabulary file.
    """
    import h5py

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    softmax, vocabulary = folder / HDF5_SOFTMAX_NAME, folder / VOCAB_NAME
    with h5py.File(softmax, "w") as handle, torch.no_grad():
        handle.create_dataset("softmax/W", data=head.softmax.weight.detach().float().cpu().numpy())
        handle.create_dataset("softmax/b", data=head.softmax.bias.detach().float().cpu().numpy())
    vocabulary.write_text("".join(word + "\n" for word in head.words), encoding="utf-8")
    return softmax, vocabulary


def check_softmax_file(path: Path) -> None:
    """Refuse a downloaded softmax file that is no readable HDF5 with ``softmax/W`` and ``softmax/b``."""
    import h5py

    try:
        with h5py.File(path, "r") as handle:
            for name in ("softmax/W", "softmax/b"):
                if _own_dataset(handle, name, path) is None:
                    raise ModelFileError(path, f"dataset {name!r} is missing")
    except OSError as err:
        raise ModelFileError(path, f"not a readable HDF5 file ({err})") from err


def find_head_files(folder: Path) -> Optional[Tuple[Path, Path]]:
    """The published softmax and vocabulary in ``folder``: ``softmax.hdf5`` or the one
    ``*softmax*.hdf5``, with ``vocab.txt`` or the one ``vocab*.txt``. None where there is no
    softmax; a softmax without a vocabulary, or two candidates for either, is an error."""
    softmax = _one(folder, HDF5_SOFTMAX_NAME, "*softmax*.hdf5")
    if softmax is None:
        return None
    vocabulary = _one(folder, VOCAB_NAME, "vocab*.txt")
    if vocabulary is None:
        raise ModelFileError(softmax, f"a softmax with no vocabulary beside it: put its words there as {VOCAB_NAME}")
    return softmax, vocabulary


def _one(folder: Path, name: str, pattern: str) -> Optional[Path]:
    if (folder / name).is_file():
        return folder / name
    found = sorted(p for p in folder.glob(pattern) if p.is_file())
    if len(found) > 1:
        raise ModelFileError(folder, f"{len(found)} files match {pattern} ({', '.join(p.name for p in found)}); "
                                     f"name the one to use {name}")
    return found[0] if found else None
