"""biLMs and their softmax from TensorFlow files, read without TensorFlow (``tf_bundle``).

Layouts read, as their publishers ship them:

- bilm-tf's training checkpoint folder: ``checkpoint`` (its path, often absolute on the training
  machine, is read for its base name only), ``model.ckpt-N.index`` + ``.data-*``, ``options.json``
  (training says ``n_characters`` 261, inference 262: either is read) and ``vocab.txt``;
  variables ``lm/char_embed``, ``lm/CNN/W_cnn_0``, ``lm/RNN_0/rnn/multi_rnn_cell/cell_0/lstm_cell/kernel``,
  ``lm/softmax/W``, ..., beside Adagrad slots, ``global_step`` and ``train_perplexity`` (ignored);
- NLPL's "full" zips: the same checkpoint files beside ``model.hdf5``, ``options.json``, ``vocab.txt``;
- TF-Hub SavedModels (google/elmo, DeepPavlov's ``elmo_*`` modules): ``variables/variables.index``
  + shards, bilm-tf's inference-graph names (``bilm/char_embed`` with its padding row,
  ``bilm/RNN_0/RNN/MultiRNNCell/Cell0/rnn/lstm_cell/kernel``, ...), no options file, no softmax;
- DeepPavlov's language models (``elmo-lm-ready4fine-tuning-*.tar.gz``): ``options.json``,
  ``vocab.txt`` and ``saves/model.*``, a bilm-tf training checkpoint; such folders and zips also
  read packed as .tar.gz, .zip, or unpacked.

Every name maps onto the HDF5 names ``allennlp`` reads (``RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0``),
whatever prefix (``lm/``, ``bilm/``, ``module/bilm/``) the file uses, and the tensors are set
through ``allennlp``'s own conversions: the same math as the published HDF5 files. Shapes decide
the architecture; ``options.json`` supplies what shapes cannot show (activation, clipping, skip
connections, characters per token), or, where there is none, bilm-tf's published values with a
warning. An options file that disagrees with the shapes is overruled by them, with a warning.
"""
import json
import re
import tempfile
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Dict, Iterator, List, Optional, Tuple, Union

import numpy as np
import torch

from ..bilm import BiLM, BiLMConfig
from ..bilm.softmax import WordSoftmax
from .allennlp import _tensors, config_from_options, tensor_shapes
from .archive import ARCHIVE_ERRORS
from .errors import ModelFileError
from .lm_head import LMHead, read_head_vocabulary
from .limits import check_config_size, check_model_bytes, tensor_bytes
from .tf_bundle import MAX_INDEX_BYTES, TensorBundle
from .tf_layouts import INDEX_SUFFIX, ModelFiles, checkpoint_files, checkpoint_prefix, find_beside

PathLike = Union[str, Path]
OPTIONS_NAME = "options.json"
VOCAB_NAME = "vocab.txt"
BYTE_CHARACTERS = 262  # the inference id scheme; bilm-tf's training writes 261 (no padding id)
# bilm-tf's published values of what shapes cannot show (every published options.json has them)
UNSEEN_DEFAULTS = {
    "activation": "relu", "cell_clip": 3.0, "proj_clip": 3.0, "use_skip_connections": True,
    "max_characters_per_token": 50,
}
ANCHOR = "CNN/W_cnn_0"
FLOAT_DTYPES = (1, 2, 14, 19)  # TensorFlow's float32, float64, bfloat16, float16


@dataclass
class TFModel:
    """A located TensorFlow biLM: its tensors, options and vocabulary.

    bundle (TensorBundle): the checkpoint.
    prefix (str): the variables' common prefix ("lm/", "bilm/", ...).
    names (Dict[str, str]): HDF5-style name -> name in the checkpoint.
    options (Optional[dict]): the options.json beside it, if any.
    vocab (Optional[str]): the vocabulary file's text, if any.
    source (str): what to name in messages.
    vocab_name (Optional[str]): the vocabulary file's name in the folder or archive, if any.
    """

    bundle: TensorBundle
    prefix: str
    names: Dict[str, str]
    options: Optional[dict]
    vocab: Optional[str]
    source: str
    vocab_name: Optional[str] = None


@contextmanager
def open_tf_model(path: PathLike) -> Iterator[TFModel]:
    """Locate the biLM checkpoint in a folder, zip or tar archive (see the module docstring)."""
    path = Path(path)
    if not path.exists():
        raise ModelFileError(path, "not found")
    files = ModelFiles(path)
    try:
        prefix = checkpoint_prefix(files)
        folder = PurePosixPath(prefix).parent
        index = files.read(prefix + INDEX_SUFFIX, limit=MAX_INDEX_BYTES)
        source = f"{path}/{prefix}"

        def open_shard(k: int) -> Tuple[BinaryIO, int]:
            name = f"{prefix}.data-{k:05d}-of-{bundle.num_shards:05d}"
            return files.open(name), files.sizes[name]

        bundle = TensorBundle(index, open_shard, source=source)
        options_name = find_beside(files, folder, OPTIONS_NAME)
        vocab_name = find_beside(files, folder, VOCAB_NAME)
        options = _read_options(files, options_name, path) if options_name else None
        vocab = _read_text(files, vocab_name, path) if vocab_name else None
        var_prefix, names = _canonical_names(bundle, source)
        yield TFModel(bundle, var_prefix, names, options, vocab, source, vocab_name)
    finally:
        files.close()


def load_bilm_tf(path: PathLike) -> BiLM:
    """Build a biLM from a TensorFlow checkpoint or SavedModel (see the module docstring).

    path (PathLike): a folder, .zip or .tar.gz holding it.
    RETURNS (BiLM): the model in eval mode, on CPU.
    """
    with open_tf_model(path) as model:
        config = tf_config(model)
        check_config_size(config, model.source)
        expected = tensor_shapes(config)
        missing = [name for name in expected if name not in model.names]
        if missing:
            raise ModelFileError(model.source, f"no tensor for {missing[0]} (looked for it under {model.prefix!r})")
        for name, shape in expected.items():  # compared before the model is built or a byte read
            entry = model.bundle.entries[model.names[name]]
            stored = entry.shape
            if name == "char_embed" and stored[:1] == (config.n_characters,):  # with the padding row
                stored = (stored[0] - 1, *stored[1:])
            if stored != shape or entry.dtype not in FLOAT_DTYPES:
                what = f"shape {entry.shape}" if stored != shape else f"TF dtype {entry.dtype}, not float"
                raise ModelFileError(model.source, f"tensor {entry.name!r} has {what}, expected {shape}")
        bilm = BiLM(config)
        tensors = list(_tensors(bilm))
        values = _read_tensors(model, [model.names[t.name] for t in tensors])
        with torch.no_grad():
            for tensor in tensors:
                name = model.names[tensor.name]
                array = values.pop(name)
                if tensor.name == "char_embed" and array.shape[0] == config.n_characters:
                    array = array[1:]  # the inference graph's padding row; ours is zero too
                _check_values(array, name, model.source)
                tensor.read(np.ascontiguousarray(array, dtype=np.float32))
    return bilm.eval()


def read_tf_softmax(path: PathLike) -> Tuple[WordSoftmax, Optional[str]]:
    """The word softmax of a bilm-tf checkpoint (``lm/softmax/W`` (V, P), ``lm/softmax/b`` (V,)),
    and the text of the vocabulary file beside it (one word a line; None where there is none).

    RETURNS (Tuple[WordSoftmax, Optional[str]]): the head, in eval mode, and its vocabulary file.
    """
    with open_tf_model(path) as model:
        w_name, b_name = model.prefix + "softmax/W", model.prefix + "softmax/b"
        if w_name not in model.bundle or b_name not in model.bundle:
            raise ModelFileError(
                model.source, "no softmax in this checkpoint (TF-Hub modules and HDF5 dumps leave it out; "
                              "bilm-tf's training checkpoints have it)"
            )
        w_entry, b_entry = model.bundle.entries[w_name], model.bundle.entries[b_name]
        if len(w_entry.shape) != 2 or b_entry.shape != w_entry.shape[:1]:
            raise ModelFileError(model.source, f"softmax W {w_entry.shape} and b {b_entry.shape} do not fit together")
        check_model_bytes(tensor_bytes([w_entry.shape, b_entry.shape]), model.source, "its softmax's parameters")
        values = _read_tensors(model, [w_name, b_name])
        weight, bias = values[w_name], values[b_name]
        if weight.ndim != 2 or bias.shape != (weight.shape[0],):
            raise ModelFileError(model.source, f"softmax W {weight.shape} and b {bias.shape} do not fit together")
        for array, name in ((weight, w_name), (bias, b_name)):
            _check_values(array, name, model.source)
        softmax = WordSoftmax(weight.shape[0], weight.shape[1])
        with torch.no_grad():
            softmax.weight.copy_(torch.from_numpy(weight.astype(np.float32)))
            softmax.bias.copy_(torch.from_numpy(bias.astype(np.float32)))
        return softmax.eval(), model.vocab


def read_tf_head(path: PathLike) -> Optional[LMHead]:
    """The language-model head of a bilm-tf checkpoint: its softmax and the words of the
    ``vocab.txt`` beside it, read as the published head vocabularies are (``lm_head``).

    RETURNS (Optional[LMHead]): the head, whose ``files`` are the checkpoint's and the vocabulary's
        (in a folder) or the archive; None where the checkpoint holds no softmax (TF-Hub modules).
    """
    path = Path(path)
    with open_tf_model(path) as model:
        if model.prefix + "softmax/W" not in model.bundle:
            return None
        vocab_file = (path / model.vocab_name,) if path.is_dir() and model.vocab_name else ()
    softmax, vocab = read_tf_softmax(path)
    if vocab is None:
        raise ModelFileError(path, f"no {VOCAB_NAME} beside the checkpoint: the softmax rows cannot be named")
    with tempfile.TemporaryDirectory(prefix="spacy-elmo-vocab-") as work:
        copy = Path(work) / VOCAB_NAME
        copy.write_text(vocab, encoding="utf-8")
        try:
            words = read_head_vocabulary(copy)
        except ModelFileError as err:
            raise ModelFileError(path, f"{VOCAB_NAME}: {err.problem}") from err
    return LMHead(softmax, tuple(words), str(path), (*checkpoint_files(path), *vocab_file))


def tf_config(model: TFModel) -> BiLMConfig:
    """The architecture: sizes from the tensors' shapes, the rest from options.json (see the
    module docstring). RETURNS (BiLMConfig): the config."""
    shapes = {name: model.bundle.entries[key].shape for name, key in model.names.items()}
    inferred = _shape_options(shapes, model.source)
    if model.options is None:
        warnings.warn(
            f"{model.source}: no {OPTIONS_NAME} beside the checkpoint; sizes are read from the tensors, and "
            f"activation, clipping, skip connections and characters per token are bilm-tf's published values "
            f"{UNSEEN_DEFAULTS}", stacklevel=3,
        )
        return BiLMConfig(**inferred, **UNSEEN_DEFAULTS)  # type: ignore[arg-type]
    try:
        stated = config_from_options(model.options, model.source)
    except ModelFileError as err:
        raise ModelFileError(model.source, f"{OPTIONS_NAME}: {err.problem}") from err
    differ = {k: (getattr(stated, k), v) for k, v in inferred.items() if getattr(stated, k) != v and k != "n_characters"}
    if differ:
        said = ", ".join(f"{k} {a} (the tensors say {b})" for k, (a, b) in differ.items())
        warnings.warn(f"{model.source}: {OPTIONS_NAME} disagrees with the checkpoint: {said}; the tensors' shapes are used", stacklevel=3)
    # n_characters: 261 in training options, 262 for inference; the byte ids are the same
    return stated.replace(**inferred)


def _shape_options(shapes: Dict[str, Tuple[int, ...]], source: str) -> dict:
    def shape(name: str, rank: int) -> Tuple[int, ...]:
        if name not in shapes or len(shapes[name]) != rank:
            raise ModelFileError(source, f"no {rank}-d tensor for {name}; is this an ELMo biLM checkpoint?")
        return shapes[name]

    rows, char_dim = shape("char_embed", 2)
    if rows not in (BYTE_CHARACTERS - 1, BYTE_CHARACTERS):
        raise ModelFileError(source, f"char_embed has {rows} rows; bilm-tf's byte ids need 261 (training) or 262")
    filters = []
    while f"CNN/W_cnn_{len(filters)}" in shapes:
        _, width, _, count = shape(f"CNN/W_cnn_{len(filters)}", 4)
        filters.append((width, count))
    n_highway = 0
    while f"CNN_high_{n_highway}/W_carry" in shapes:
        n_highway += 1
    if "CNN_proj/W_proj" not in shapes:
        raise ModelFileError(source, "no CNN_proj/W_proj: a biLM whose filters equal its projection size is not read")
    n_layers = 0
    while f"RNN_0/RNN/MultiRNNCell/Cell{n_layers}/LSTMCell/W_0" in shapes:
        n_layers += 1
    dim, projection_dim = shape("RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_P_0", 2)
    return {
        "char_embedding_dim": char_dim, "filters": tuple(filters), "n_highway": n_highway,
        "n_characters": BYTE_CHARACTERS, "dim": dim, "projection_dim": projection_dim, "n_layers": n_layers,
    }


# bilm-tf's training graph, its inference graph and the HDF5 dump name the LSTM differently
_RENAMES: List[Tuple[str, str]] = [
    (r"^RNN_(\d+)/rnn/multi_rnn_cell/cell_(\d+)/", r"RNN_\1/RNN/MultiRNNCell/Cell\2/"),
    (r"^RNN_(\d+)/rnn/lstm_cell/", r"RNN_\1/RNN/MultiRNNCell/Cell0/lstm_cell/"),  # one layer: no MultiRNNCell
    (r"^(RNN_\d+/RNN/MultiRNNCell/Cell\d+)/rnn/", r"\1/"),
    (r"/residual_wrapper/", "/"),
    (r"/lstm_cell/projection/(kernel|weights)$", "/LSTMCell/W_P_0"),
    (r"/lstm_cell/(kernel|weights)$", "/LSTMCell/W_0"),
    (r"/lstm_cell/(bias|biases)$", "/LSTMCell/B"),
]


def hdf5_name(name: str) -> str:
    """The name bilm-tf's ``dump_weights`` gives a variable (without its scope prefix)."""
    for pattern, replacement in _RENAMES:
        name = re.sub(pattern, replacement, name)
    return name


def _canonical_names(bundle: TensorBundle, source: str) -> Tuple[str, Dict[str, str]]:
    anchors = [n for n in bundle.names() if n == ANCHOR or n.endswith("/" + ANCHOR)]
    if not anchors:
        raise ModelFileError(source, f"no {ANCHOR} variable: not a bilm-tf ELMo checkpoint")
    if len(anchors) > 1:
        raise ModelFileError(source, f"several biLMs in one checkpoint ({', '.join(anchors)}): which one is meant is not clear")
    prefix = anchors[0][: -len(ANCHOR)]
    names = {hdf5_name(n[len(prefix):]): n for n in bundle.names() if n.startswith(prefix)}
    return prefix, names


def _read_options(files: ModelFiles, name: str, path: Path) -> dict:
    try:
        options = json.loads(files.read(name).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise ModelFileError(f"{path}/{name}", f"not a valid options JSON file ({err})") from err
    if not isinstance(options, dict):
        raise ModelFileError(f"{path}/{name}", "options JSON must be an object with 'lstm' and 'char_cnn' sections")
    return options


def _read_text(files: ModelFiles, name: str, path: Path) -> str:
    try:
        return files.read(name).decode("utf-8")
    except UnicodeDecodeError as err:
        raise ModelFileError(f"{path}/{name}", f"not UTF-8 text ({err})") from err


def _read_tensors(model: TFModel, names: List[str]) -> Dict[str, np.ndarray]:
    """``read_many``, with a damaged archive's errors (a corrupt deflate stream, a cut tar) as ModelFileError."""
    try:
        return model.bundle.read_many(names)
    except ARCHIVE_ERRORS as err:
        raise ModelFileError(model.source, f"its data could not be read: the archive is damaged or truncated ({err})") from err


def _check_values(array: np.ndarray, name: str, source: str) -> None:
    if array.dtype.kind != "f":
        raise ModelFileError(source, f"tensor {name!r} has dtype {array.dtype}, not float")
    if not np.isfinite(array).all():
        raise ModelFileError(source, f"tensor {name!r} holds NaN or infinite values")
