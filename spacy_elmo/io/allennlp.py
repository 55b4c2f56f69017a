"""The published weight format of bilm-tf / AllenNLP: options.json + HDF5.

Quirks handled here (see tests/io/test_allennlp.py): ``char_embed`` has no row for the
padding id 0; convolutions are stored (1, width, in, out); TensorFlow's LSTM gate order
is [i, j, f, o] with a forget bias of +1 that is not stored; dense weights are stored
(in, out); the LSTM kernel ``W_0`` stacks the input rows over the recurrent rows.
Our highway layers use bilm-tf's carry-gate convention, so highway weights map directly.
"""
import json
import math
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple, Union

import numpy as np
import torch

from ..bilm import BiLM, BiLMConfig
from ..bilm.lstm import LSTMPLayer
from .errors import ModelFileError
from .json_file import read_json_object
from .limits import check_config_size

PathLike = Union[str, Path]
FORGET_BIAS = 1.0
OPTIONS_NAME = "options.json"
# the weights beside it: bilm-tf's (and our download cache's) name, then NLPL's
WEIGHTS_NAMES = ("weights.hdf5", "model.hdf5")
# the top-level names of a biLM's datasets: one the options do not imply means another architecture
BILM_GROUPS = ("char_embed", "CNN", "RNN_")
# each chunk's place is checked before reading; published files are contiguous (one extent each)
MAX_CHUNKS = 100_000


class Tensor(NamedTuple):
    """One HDF5 dataset and how it maps onto torch parameters.

    name (str): dataset path in the HDF5 file.
    shape (Tuple[int, ...]): the shape the file must have.
    read (Callable): numpy array from the file -> writes it into the model.
    write (Callable): model -> numpy array for the file.
    """

    name: str
    shape: Tuple[int, ...]
    read: Callable[[np.ndarray], None]
    write: Callable[[], np.ndarray]


def read_options(path: PathLike) -> BiLMConfig:
    """Read a published options.json into a BiLMConfig, with errors that name the file."""
    path = Path(path)
    options = read_json_object(
        path, missing="options file not found", invalid="not a valid options JSON file",
        not_object="options JSON must be an object with 'lstm' and 'char_cnn' sections",
    )
    return config_from_options(options, path)


def config_from_options(options: Dict[str, Any], source: PathLike) -> BiLMConfig:
    """The BiLMConfig of a published options object, every size a whole number (``int()`` would cut
    64.5 to 64 and build another model than the file describes). Errors name ``source``."""
    lstm, cnn = options.get("lstm"), options.get("char_cnn")
    sizes = [(f"lstm.{k}", lstm.get(k)) for k in ("dim", "projection_dim", "n_layers")] if isinstance(lstm, dict) else []
    if isinstance(cnn, dict):
        sizes += [(f"char_cnn.{k}", cnn.get(k)) for k in ("n_highway", "n_characters", "max_characters_per_token")]
        embedding = cnn.get("embedding")
        sizes.append(("char_cnn.embedding.dim", embedding.get("dim") if isinstance(embedding, dict) else None))
        filters = cnn.get("filters") if isinstance(cnn.get("filters"), list) else []
        sizes += [("char_cnn.filters", v) for pair in filters for v in (pair if isinstance(pair, list) else [pair])]
    for name, value in sizes:
        if value is not None and not _whole(value):
            raise ModelFileError(source, f"{name} is {value!r}, not a whole number")
    try:
        return BiLMConfig.from_options(options)
    except (ValueError, OverflowError) as err:
        raise ModelFileError(source, str(err)) from err


def _whole(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, int) or (math.isfinite(value) and value == int(value))


def pair_candidates(names: Iterable[str]) -> Tuple[List[str], List[str]]:
    """The files among ``names`` (base names: a folder's files, a zip's members) that may be a
    published pair's options and weights: ``options.json`` and ``weights.hdf5`` / ``model.hdf5``
    where present, else the names AllenNLP serves them under (``elmo_<shape>_options.json``, any
    ``*options.json``; ``elmo_<shape>_weights.hdf5``, any ``*weights*.hdf5`` that is no softmax).

    RETURNS (Tuple[List[str], List[str]]): the options candidates and the weights candidates, sorted.
    """
    names = sorted(set(names))
    options = [OPTIONS_NAME] if OPTIONS_NAME in names else [n for n in names if n.endswith(OPTIONS_NAME)]
    standard = [n for n in WEIGHTS_NAMES if n in names]
    weights = standard[:1] or [n for n in names if n.endswith(".hdf5") and "weights" in n and "softmax" not in n]
    return options, weights


def find_pair(names: Iterable[str], where: PathLike) -> Optional[Tuple[str, str]]:
    """The options and weights of the published pair among ``names`` (see ``pair_candidates``).

    where (PathLike): the folder or zip they are in, for messages.
    RETURNS (Optional[Tuple[str, str]]): the two names; None where there is no options file. An
        options file without weights, or two candidates for either, is a ModelFileError.
    """
    options, weights = pair_candidates(names)
    if not options:
        return None
    for found, what in ((options, "options files"), (weights, "weights files")):
        if len(found) > 1:
            raise ModelFileError(where, f"{len(found)} {what} ({', '.join(found)}): which pair is the model is "
                                        "not clear; keep one, or give options and weights as two files")
    if not weights:
        raise ModelFileError(where, f"{options[0]} but no {' or '.join(WEIGHTS_NAMES)} beside it (nor an "
                                    "elmo_..._weights.hdf5, as AllenNLP names it); name the weights so, or give options "
                                    "and weights as two files")
    return options[0], weights[0]


def load_allennlp(options: PathLike, weights: PathLike) -> BiLM:
    """Build a biLM from a published options.json + HDF5 weights pair.

    Before the model is built or a value read, the model's size is held to the cap (``limits``),
    then every dataset the options imply is compared with the file: its name, shape and float
    dtype, and that its bytes are in the file (``_check_storage``); a dataset of the biLM's groups
    that the options do not imply is refused too. A hostile pair costs metadata reads only.

    options (PathLike): the options JSON.
    weights (PathLike): the HDF5 weights (no softmax; it is not in published files).
    RETURNS (BiLM): the model in eval mode, on CPU.
    """
    import h5py

    config = read_options(options)
    weights = Path(weights)
    if not weights.is_file():
        raise ModelFileError(weights, "weights file not found")
    try:
        handle = h5py.File(weights, "r")
    except OSError as err:
        raise ModelFileError(weights, f"not a readable HDF5 file, perhaps truncated or damaged ({err})") from err
    with handle, torch.no_grad():
        check_config_size(config, options)  # in constant time: before the datasets are listed
        try:
            datasets = _matching_datasets(handle, tensor_shapes(config), options, weights)
        except ModelFileError:
            raise
        except (RuntimeError, OSError, KeyError, ValueError, TypeError) as err:  # h5py on a damaged structure
            raise ModelFileError(weights, f"not a readable HDF5 file, its structure is damaged ({err})") from err
        bilm = BiLM(config)
        for tensor in _tensors(bilm):
            try:
                values = np.asarray(datasets[tensor.name][...], dtype=np.float32)
            except (OSError, ValueError, RuntimeError) as err:
                raise ModelFileError(weights, f"dataset {tensor.name!r} cannot be read ({err})") from err
            if not np.isfinite(values).all():
                raise ModelFileError(weights, f"dataset {tensor.name!r} holds NaN or infinite values")
            tensor.read(values)
    return bilm.eval()


def _matching_datasets(handle, shapes: Dict[str, Tuple[int, ...]], options: PathLike, weights: Path) -> Dict[str, Any]:
    """The datasets ``shapes`` names, each checked against the file before anything is read."""
    import h5py

    datasets = {}
    size = weights.stat().st_size
    for name, shape in shapes.items():
        dataset = _own_dataset(handle, name, weights)
        if dataset is None:
            raise ModelFileError(weights, f"dataset {name!r} is missing; is this a biLM weights file for {options}?")
        if tuple(dataset.shape) != shape:
            raise ModelFileError(
                weights,
                f"dataset {name!r} has shape {tuple(dataset.shape)} but the options file "
                f"{options} implies {shape}: the options do not match these weights",
            )
        if dataset.dtype.kind != "f":
            raise ModelFileError(weights, f"dataset {name!r} has dtype {dataset.dtype}, not float")
        _check_storage(dataset, name, weights, size)
        datasets[name] = dataset
    extra: List[str] = []
    handle.visititems(lambda n, node: extra.append(n) if isinstance(node, h5py.Dataset) and n not in shapes
                      and n.split("/")[0].startswith(BILM_GROUPS) else None)
    if extra:
        raise ModelFileError(weights, f"holds {len(extra)} datasets the options file {options} does not imply "
                                      f"({', '.join(sorted(extra)[:3])}...): the options do not match these weights")
    return datasets


def _check_storage(dataset, name: str, weights: Path, file_size: int) -> None:
    """That the bytes of ``dataset`` lie in the file, from its layout alone (nothing is read): a
    contiguous dataset's extent, every chunk of a chunked one (all present, none past the end)."""
    import h5py

    layout = dataset.id.get_create_plist().get_layout()
    needed = dataset.size * dataset.dtype.itemsize
    if layout == h5py.h5d.CONTIGUOUS:
        offset, stored = dataset.id.get_offset(), dataset.id.get_storage_size()
        if needed and (offset is None or stored < needed or offset + stored > file_size):
            where = "no bytes stored" if offset is None else f"{stored} bytes at offset {offset}"
            raise ModelFileError(weights, f"dataset {name!r} needs {needed} bytes but has {where} in a file of "
                                          f"{file_size}: the file is truncated or damaged")
    elif layout == h5py.h5d.CHUNKED:
        chunks = dataset.chunks
        expected = math.prod(-(-n // c) for n, c in zip(dataset.shape, chunks)) if dataset.size else 0
        count = dataset.id.get_num_chunks()
        if count > MAX_CHUNKS:
            raise ModelFileError(weights, f"dataset {name!r} is cut into {count} chunks, more than {MAX_CHUNKS}: "
                                          "not a biLM weights file as written; store it contiguous")
        if count != expected:
            raise ModelFileError(weights, f"dataset {name!r} has {count} of its {expected} chunks stored: "
                                          "the file is truncated or damaged")
        for k in range(count):
            info = dataset.id.get_chunk_info(k)
            if info.byte_offset is None or info.byte_offset + info.size > file_size:
                raise ModelFileError(weights, f"dataset {name!r} has a chunk past the end of the file: truncated")


def _own_dataset(handle, name: str, weights: Path):
    """The dataset at ``name`` (None if missing or not a dataset), refusing anything that would read
    outside this file: an untrusted HDF5 file could otherwise point a name at another file on the
    machine through an external or soft link, a virtual dataset, or external raw storage."""
    import h5py

    node = handle
    for part in name.split("/"):
        link = node.get(part, getlink=True) if isinstance(node, h5py.Group) else None
        if link is None:
            return None
        if not isinstance(link, h5py.HardLink):
            kind = type(link).__name__
            raise ModelFileError(weights, f"{name!r} is reached through a {kind}; weights must be stored in the file")
        node = node[part]
    if not isinstance(node, h5py.Dataset):
        return None
    if node.is_virtual or node.external:
        raise ModelFileError(weights, f"dataset {name!r} keeps its data outside the file; it must be stored in it")
    return node


def export_allennlp(bilm: BiLM, options: PathLike, weights: PathLike) -> None:
    """Write a biLM as options.json + HDF5 in the published layout (dtype float32, 261-row char_embed).

    The original tools (bilm-tf, AllenNLP) read the result. A biLM with a learned character
    vocabulary (an imported ELMoForManyLangs model) is refused: the format has byte ids only and no
    word embedding, so its file would compute something else; save it with ``save_bilm``.
    """
    import h5py

    if bilm.char_vocab is not None or bilm.token_encoder.word_embedding is not None:
        raise ValueError(
            "this biLM reads a learned character vocabulary (an ELMoForManyLangs model), which the published "
            "AllenNLP/bilm-tf format cannot hold (byte ids only, no word embedding); save it with save_bilm "
            "(our directory format keeps the vocabulary) or convert it to a spaCy pipeline"
        )

    options, weights = Path(options), Path(weights)
    options.parent.mkdir(parents=True, exist_ok=True)
    weights.parent.mkdir(parents=True, exist_ok=True)
    options.write_text(json.dumps(bilm.config.to_options(), indent=2), encoding="utf-8")
    with h5py.File(weights, "w") as handle, torch.no_grad():
        for tensor in _tensors(bilm):
            handle.create_dataset(tensor.name, data=tensor.write().astype(np.float32))


def tensor_shapes(config: BiLMConfig) -> Dict[str, Tuple[int, ...]]:
    """The datasets (name -> shape) a published options file implies, from the options alone.

    RETURNS (Dict[str, Tuple[int, ...]]): in the order ``_tensors`` sets them.
    """
    shapes: Dict[str, Tuple[int, ...]] = {"char_embed": (config.n_characters - 1, config.char_embedding_dim)}
    for i, (width, count) in enumerate(config.filters):
        shapes[f"CNN/W_cnn_{i}"] = (1, width, config.char_embedding_dim, count)
        shapes[f"CNN/b_cnn_{i}"] = (count,)
    n, p, dim = config.n_filters, config.projection_dim, config.dim
    dense = [(f"CNN_high_{k}/{{}}_{part}", (n, n)) for k in range(config.n_highway) for part in ("transform", "carry")]
    for pattern, (rows, cols) in [*dense, ("CNN_proj/{}_proj", (n, p))]:
        shapes[pattern.format("W")], shapes[pattern.format("b")] = (rows, cols), (cols,)
    for direction in range(2):
        for k in range(config.n_layers):
            prefix = f"RNN_{direction}/RNN/MultiRNNCell/Cell{k}/LSTMCell"
            shapes.update({f"{prefix}/W_0": (2 * p, 4 * dim), f"{prefix}/B": (4 * dim,), f"{prefix}/W_P_0": (dim, p)})
    return shapes


def _tensors(bilm: BiLM) -> Iterator[Tensor]:
    cfg = bilm.config
    shapes = tensor_shapes(cfg)
    enc = bilm.token_encoder
    emb = enc.char_embedding.weight
    yield Tensor(
        "char_embed",
        shapes["char_embed"],
        lambda a: emb.copy_(torch.from_numpy(np.concatenate([np.zeros((1, a.shape[1]), np.float32), a]))),
        lambda: emb[1:].cpu().numpy(),
    )
    for i, conv in enumerate(enc.convolutions):
        yield Tensor(
            f"CNN/W_cnn_{i}",
            shapes[f"CNN/W_cnn_{i}"],
            _setter(conv.weight, lambda a: a[0].transpose(2, 1, 0)),
            lambda conv=conv: conv.weight.cpu().numpy().transpose(2, 1, 0)[None],
        )
        yield Tensor(f"CNN/b_cnn_{i}", shapes[f"CNN/b_cnn_{i}"], _setter(conv.bias), _getter(conv.bias))
    for k in range(cfg.n_highway):
        for part, linear in (("transform", enc.highway.transform[k]), ("carry", enc.highway.carry[k])):
            yield from _dense(f"CNN_high_{k}/W_{part}", f"CNN_high_{k}/b_{part}", linear, shapes)
    yield from _dense("CNN_proj/W_proj", "CNN_proj/b_proj", enc.projection, shapes)
    for direction, stack in enumerate((bilm.forward_lstm, bilm.backward_lstm)):
        for k, layer in enumerate(stack.layers):
            prefix = f"RNN_{direction}/RNN/MultiRNNCell/Cell{k}/LSTMCell"
            yield from _lstm_tensors(prefix, layer, shapes)


def _lstm_tensors(prefix: str, layer: LSTMPLayer, shapes: Dict[str, Tuple[int, ...]]) -> Iterator[Tensor]:
    w_in, w_state = layer.input_linearity.weight, layer.state_linearity.weight
    n_in, dim = w_in.shape[1], layer.dim

    def read_kernel(a: np.ndarray) -> None:
        w_in.copy_(torch.from_numpy(np.ascontiguousarray(a[:n_in].T)))
        w_state.copy_(torch.from_numpy(np.ascontiguousarray(a[n_in:].T)))

    def read_bias(a: np.ndarray) -> None:
        bias = a.copy()
        bias[2 * dim : 3 * dim] += FORGET_BIAS
        layer.input_linearity.bias.copy_(torch.from_numpy(bias))

    def write_bias() -> np.ndarray:
        bias = layer.input_linearity.bias.cpu().numpy().copy()
        bias[2 * dim : 3 * dim] -= FORGET_BIAS
        return bias

    yield Tensor(
        f"{prefix}/W_0",
        shapes[f"{prefix}/W_0"],
        read_kernel,
        lambda: np.concatenate([w_in.cpu().numpy().T, w_state.cpu().numpy().T]),
    )
    yield Tensor(f"{prefix}/B", shapes[f"{prefix}/B"], read_bias, write_bias)
    proj = layer.projection.weight
    yield Tensor(f"{prefix}/W_P_0", shapes[f"{prefix}/W_P_0"], _setter(proj, np.transpose), _getter(proj, True))


def _dense(w_name: str, b_name: str, linear: torch.nn.Linear, shapes: Dict[str, Tuple[int, ...]]) -> List[Tensor]:
    return [
        Tensor(w_name, shapes[w_name], _setter(linear.weight, np.transpose), _getter(linear.weight, True)),
        Tensor(b_name, shapes[b_name], _setter(linear.bias), _getter(linear.bias)),
    ]


def _setter(param: torch.Tensor, transform: Callable[[np.ndarray], np.ndarray] = lambda a: a):
    return lambda a: param.copy_(torch.from_numpy(np.ascontiguousarray(transform(a))))


def _getter(param: torch.Tensor, transpose: bool = False):
    return lambda: param.detach().cpu().numpy().T if transpose else param.detach().cpu().numpy()
