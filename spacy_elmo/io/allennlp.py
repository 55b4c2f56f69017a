"""The published weight format of bilm-tf / AllenNLP: options.json + HDF5.

Quirks handled here (see tests/io/test_allennlp.py): ``char_embed`` has no row for the
padding id 0; convolutions are stored (1, width, in, out); TensorFlow's LSTM gate order
is [i, j, f, o] with a forget bias of +1 that is not stored; dense weights are stored
(in, out); the LSTM kernel ``W_0`` stacks the input rows over the recurrent rows.
Our highway layers use bilm-tf's carry-gate convention, so highway weights map directly.
"""
import json
from pathlib import Path
from typing import Callable, Iterable, Iterator, List, NamedTuple, Optional, Tuple, Union

import numpy as np
import torch

from ..bilm import BiLM, BiLMConfig
from ..bilm.lstm import LSTMPLayer
from .errors import ModelFileError
from .json_file import read_json_object

PathLike = Union[str, Path]
FORGET_BIAS = 1.0
OPTIONS_NAME = "options.json"
# the weights beside it: bilm-tf's (and our download cache's) name, then NLPL's
WEIGHTS_NAMES = ("weights.hdf5", "model.hdf5")


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
    try:
        return BiLMConfig.from_options(options)
    except ValueError as err:
        raise ModelFileError(path, str(err)) from err


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

    options (PathLike): the options JSON.
    weights (PathLike): the HDF5 weights (no softmax; it is not in published files).
    RETURNS (BiLM): the model in eval mode, on CPU.
    """
    import h5py

    config = read_options(options)
    weights = Path(weights)
    if not weights.is_file():
        raise ModelFileError(weights, "weights file not found")
    bilm = BiLM(config)
    try:
        handle = h5py.File(weights, "r")
    except OSError as err:
        raise ModelFileError(weights, f"not a readable HDF5 file, perhaps truncated or damaged ({err})") from err
    with handle, torch.no_grad():
        for tensor in _tensors(bilm):
            dataset = _own_dataset(handle, tensor.name, weights)
            if dataset is None:
                raise ModelFileError(
                    weights, f"dataset {tensor.name!r} is missing; is this a biLM weights file for {options}?"
                )
            if tuple(dataset.shape) != tensor.shape:
                raise ModelFileError(
                    weights,
                    f"dataset {tensor.name!r} has shape {tuple(dataset.shape)} but the options file "
                    f"{options} implies {tensor.shape}: the options do not match these weights",
                )
            if dataset.dtype.kind != "f":
                raise ModelFileError(weights, f"dataset {tensor.name!r} has dtype {dataset.dtype}, not float")
            try:
                values = np.asarray(dataset[...], dtype=np.float32)
            except OSError as err:
                raise ModelFileError(weights, f"dataset {tensor.name!r} cannot be read ({err})") from err
            if not np.isfinite(values).all():
                raise ModelFileError(weights, f"dataset {tensor.name!r} holds NaN or infinite values")
            tensor.read(values)
    return bilm.eval()


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


def _tensors(bilm: BiLM) -> Iterator[Tensor]:
    cfg = bilm.config
    enc = bilm.token_encoder
    emb = enc.char_embedding.weight
    yield Tensor(
        "char_embed",
        (cfg.n_characters - 1, cfg.char_embedding_dim),
        lambda a: emb.copy_(torch.from_numpy(np.concatenate([np.zeros((1, a.shape[1]), np.float32), a]))),
        lambda: emb[1:].cpu().numpy(),
    )
    for i, ((width, count), conv) in enumerate(zip(cfg.filters, enc.convolutions)):
        yield Tensor(
            f"CNN/W_cnn_{i}",
            (1, width, cfg.char_embedding_dim, count),
            _setter(conv.weight, lambda a: a[0].transpose(2, 1, 0)),
            lambda conv=conv: conv.weight.cpu().numpy().transpose(2, 1, 0)[None],
        )
        yield Tensor(f"CNN/b_cnn_{i}", (count,), _setter(conv.bias), _getter(conv.bias))
    n = cfg.n_filters
    for k in range(cfg.n_highway):
        for part, linear in (("transform", enc.highway.transform[k]), ("carry", enc.highway.carry[k])):
            yield from _dense(f"CNN_high_{k}/W_{part}", f"CNN_high_{k}/b_{part}", linear, (n, n))
    yield from _dense("CNN_proj/W_proj", "CNN_proj/b_proj", enc.projection, (n, cfg.projection_dim))
    for direction, stack in enumerate((bilm.forward_lstm, bilm.backward_lstm)):
        for k, layer in enumerate(stack.layers):
            prefix = f"RNN_{direction}/RNN/MultiRNNCell/Cell{k}/LSTMCell"
            yield from _lstm_tensors(prefix, layer)


def _lstm_tensors(prefix: str, layer: LSTMPLayer) -> Iterator[Tensor]:
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
        (n_in + layer.projection_dim, 4 * dim),
        read_kernel,
        lambda: np.concatenate([w_in.cpu().numpy().T, w_state.cpu().numpy().T]),
    )
    yield Tensor(f"{prefix}/B", (4 * dim,), read_bias, write_bias)
    proj = layer.projection.weight
    yield Tensor(f"{prefix}/W_P_0", (dim, layer.projection_dim), _setter(proj, np.transpose), _getter(proj, True))


def _dense(w_name: str, b_name: str, linear: torch.nn.Linear, shape: Tuple[int, int]) -> List[Tensor]:
    return [
        Tensor(w_name, shape, _setter(linear.weight, np.transpose), _getter(linear.weight, True)),
        Tensor(b_name, (shape[1],), _setter(linear.bias), _getter(linear.bias)),
    ]


def _setter(param: torch.Tensor, transform: Callable[[np.ndarray], np.ndarray] = lambda a: a):
    return lambda a: param.copy_(torch.from_numpy(np.ascontiguousarray(transform(a))))


def _getter(param: torch.Tensor, transpose: bool = False):
    return lambda: param.detach().cpu().numpy().T if transpose else param.detach().cpu().numpy()
