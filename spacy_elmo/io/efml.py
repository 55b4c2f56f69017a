"""ELMoForManyLangs (HIT-SCIR) model directories: ``config.json``, the architecture JSON it names,
``char.dic``, ``word.dic``, ``token_embedder.pkl`` and ``encoder.pkl``. The published models lack
the architecture JSON: ``efml_architecture`` then takes the published values, checked against the
weights' shapes.

What differs from the published AllenNLP pair, and how it maps onto a ``BiLM`` (docs/formats.md):
a learned character vocabulary (``char.dic``) instead of bytes, and an optional word embedding
(``word.dic``) whose vectors come before the highway output in the projection's input: both are
a ``bilm.CharVocabulary``. Tokens are cut to ``max_characters_per_token - 2`` code points (not
bytes); EFML's batcher swaps the begin- and end-of-word ids (the row starts with ``<eow>``'s id and
a token's characters end with ``<bow>``'s), and its sentences are wrapped in ``<bos>`` ... ``<eos>``,
each encoded as ``[<eow>, <bos>|<eos>, <bow>]`` (a literal input token "<bos>" too). The highway
keeps its *input* where its gate is 1 (ours keeps the transform: the gate weights are negated) and
applies relu whatever the CNN's activation. The LSTM gates are stored [i, f, g, o] (ours [i, g, f,
o]) with the bias on the recurrent product (ours: on the input's). The two directions are separate
stacks of ``projection_dim`` inputs with a residual connection from the second layer on, as ours.

Weights are read with ``torch.load(weights_only=True)``, which accepts the legacy (pre-zip) format
of the published files and builds tensors and containers only: a pickle that would call anything
else is refused, naming the file, before anything runs. EFML carries the LSTM state from one call
to the next and shuffles batches; here every sentence starts from a zero state, as EFML with
``reset_states()`` before each call and one batch.
"""
import io
import json
from collections import OrderedDict
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import torch

from ..files import write_atomic
from ..bilm import BiLM, BiLMConfig, CharVocabulary
from .efml_architecture import read_architecture
from .errors import ModelFileError
from .json_file import read_json_object
from .limits import check_weights_fit

PathLike = Union[str, Path]
CONFIG_NAME = "config.json"
CHAR_DIC_NAME = "char.dic"
WORD_DIC_NAME = "word.dic"
TOKEN_EMBEDDER_NAME = "token_embedder.pkl"
ENCODER_NAME = "encoder.pkl"
# the marks EFML's trainer adds to its vocabularies, and the words its batcher looks up
CHAR_SPECIALS = ("<bow>", "<eow>", "<pad>", "<oov>", "<bos>", "<eos>")
WORD_SPECIALS = ("<oov>", "<pad>")
# EFML reads a line left with one field (its whitespace key stripped) as this character
STRIPPED_KEY = "\u3000"


def is_efml_directory(path: PathLike) -> bool:
    """Whether ``path`` looks like an EFML model directory: config.json beside either .pkl file
    or char.dic (``load_efml`` then names any file that is missing)."""
    path = Path(path)
    marks = (TOKEN_EMBEDDER_NAME, ENCODER_NAME, CHAR_DIC_NAME)
    return (path / CONFIG_NAME).is_file() and any((path / name).is_file() for name in marks)


def load_efml(directory: PathLike, *, label: Optional[PathLike] = None) -> BiLM:
    """Build a biLM from an ELMoForManyLangs model directory.

    directory (PathLike): the folder EFML's ``Embedder(model_dir)`` reads.
    label (Optional[PathLike]): what the line about an architecture without its JSON names
        (default: ``directory``; the zip, where the folder is a private copy of its members).
    RETURNS (BiLM): the model in eval mode, on CPU, with its ``char_vocab``; ``embed`` gives
        EFML's ``sents2elmo(..., output_layer=-2)`` from a fresh state.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise ModelFileError(directory, "EFML model directory not found")
    config_path = directory / CONFIG_NAME
    named = read_config_path(config_path)
    embedder = read_state_dict(directory / TOKEN_EMBEDDER_NAME)
    encoder = read_state_dict(directory / ENCODER_NAME)
    architecture, architecture_path = read_architecture(
        directory, config_path, named, embedder=_shapes(embedder), encoder=_shapes(encoder), label=label
    )
    if not architecture["token_embedder"].get("char_dim"):
        # before char.dic is looked for: a words-only model has none, and that is not what is wrong
        raise ModelFileError(architecture_path, "char_dim is 0: a model without a character CNN (words only) is not supported")
    char_dic = read_dic(directory / CHAR_DIC_NAME)
    try:
        word_dim = int(architecture["token_embedder"].get("word_dim") or 0)
    except (TypeError, ValueError) as err:
        raise ModelFileError(architecture_path, f"word_dim is not a number ({err})") from err
    word_dic = read_dic(directory / WORD_DIC_NAME) if word_dim > 0 else None
    vocab = _vocabulary(char_dic, word_dic, word_dim, directory)
    try:
        config = efml_config(architecture, n_characters=len(char_dic))
    except ValueError as err:
        raise ModelFileError(architecture_path, str(err)) from err
    state = _token_encoder_state(embedder, config, vocab, directory / TOKEN_EMBEDDER_NAME)
    state.update(_encoder_state(encoder, config, directory / ENCODER_NAME))
    held = sum(value.numel() for value in state.values())
    check_weights_fit(config, held, architecture_path, words=vocab.n_words, word_dim=vocab.word_dim)
    bilm = BiLM(config, char_vocab=vocab)
    expected = bilm.state_dict()
    for name, value in state.items():
        if tuple(value.shape) != tuple(expected[name].shape):
            shapes = f"{tuple(value.shape)}, expected {tuple(expected[name].shape)}"
            raise ModelFileError(directory, f"{name} has shape {shapes}")
    bilm.load_state_dict(state)
    return bilm.eval()


def read_config_path(config_path: Path) -> str:
    """config.json's ``config_path``: where the training run kept the architecture JSON (only
    this key of config.json describes the model; the others are the trainer's options)."""
    named = _read_json(config_path).get("config_path")
    if not isinstance(named, str) or not named:
        raise ModelFileError(config_path, "has no 'config_path' naming the architecture JSON (EFML's config.json does)")
    return named


def efml_config(architecture: Dict[str, Any], *, n_characters: int) -> BiLMConfig:
    """The BiLMConfig of an EFML architecture (the ``encoder`` and ``token_embedder`` sections).

    n_characters (int): the size of the character vocabulary (char.dic).
    """
    encoder, embedder = architecture["encoder"], architecture["token_embedder"]
    if str(encoder.get("name", "")).lower() != "elmo":
        raise ValueError(f"encoder {encoder.get('name')!r} is not supported: only EFML's 'elmo' biLM")
    if str(embedder.get("name", "")).lower() != "cnn":
        raise ValueError(f"token_embedder {embedder.get('name')!r} is not supported: only EFML's 'cnn'")
    if not embedder.get("char_dim"):
        raise ValueError("char_dim is 0: a model without a character CNN (words only) is not supported")
    try:
        return BiLMConfig(
            char_embedding_dim=int(embedder["char_dim"]),
            filters=tuple(tuple(f) for f in embedder["filters"]),
            n_highway=int(embedder["n_highway"]),
            activation=str(embedder["activation"]),
            n_characters=n_characters,
            max_characters_per_token=int(embedder["max_characters_per_token"]),
            dim=int(encoder["dim"]),
            projection_dim=int(encoder["projection_dim"]),
            n_layers=int(encoder["n_layers"]),
            cell_clip=_clip(encoder.get("cell_clip")),
            proj_clip=_clip(encoder.get("proj_clip")),
            use_skip_connections=True,
        )
    except (KeyError, TypeError) as err:
        raise ValueError(f"the architecture is missing or has a malformed field: {err!r}") from err


def read_dic(path: Path) -> Dict[str, int]:
    """A char.dic or word.dic as EFML reads it: ``key<TAB>id`` lines, split as ``codecs`` splits
    them (also at U+2028, U+0085, ...), a line stripped to one field keyed U+3000."""
    if not path.is_file():
        raise ModelFileError(path, "missing; an EFML model directory holds it")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ModelFileError(path, f"not UTF-8 text ({err})") from err
    entries: Dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.strip().split("\t")
        if len(fields) == 1:
            fields.insert(0, STRIPPED_KEY)
        value = _integer(fields[1]) if len(fields) == 2 else None
        if value is None:
            raise ModelFileError(path, f"line {number} is not 'key<TAB>id' (EFML cannot read it either): {line!r}")
        entries[fields[0]] = value
    return entries


def _shapes(state: Dict[str, torch.Tensor]) -> Dict[str, Tuple[int, ...]]:
    return {name: tuple(value.shape) for name, value in state.items()}


def _integer(text: str) -> Optional[int]:
    """``int(text)`` as EFML calls it, or None where that raises."""
    try:
        return int(text)
    except ValueError:
        return None


# what torch's tensors-only unpickler raises for anything but tensors and containers (pickle's
# error, as torch.serialization re-exports it: the package imports no pickle module itself)
REFUSED_BY_WEIGHTS_ONLY = torch.serialization.pickle.UnpicklingError


def read_state_dict(path: Path) -> Dict[str, torch.Tensor]:
    """A ``torch.save``d state dict (zip or legacy format), without running pickled code."""
    if not path.is_file():
        raise ModelFileError(path, "missing; an EFML model directory holds it")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except REFUSED_BY_WEIGHTS_ONLY as err:
        said = [line for line in str(err).splitlines() if "WeightsUnpickler error" in line] or str(err).splitlines()[:1]
        raise ModelFileError(path, f"refused: holds pickled objects other than tensors ({' '.join(said)})") from err
    # torch's unpickler raises several types for a damaged file: all mean it is not a state dict
    except (RuntimeError, EOFError, ValueError, KeyError, AttributeError, TypeError, IndexError) as err:
        raise ModelFileError(path, f"not a readable torch state dict, perhaps truncated ({err!r})") from err
    if not isinstance(state, (dict, OrderedDict)):
        raise ModelFileError(path, f"holds a {type(state).__name__}, not a state dict of tensors")
    for name, value in state.items():
        if not isinstance(name, str) or not isinstance(value, torch.Tensor) or not value.is_floating_point():
            raise ModelFileError(path, f"entry {name!r} is not a float tensor")
        if not torch.isfinite(value).all():
            raise ModelFileError(path, f"tensor {name!r} holds NaN or infinite values")
    return {name: value.float() for name, value in state.items()}


def _vocabulary(
    chars: Dict[str, int], words: Optional[Dict[str, int]], word_dim: int, directory: Path
) -> CharVocabulary:
    _require(chars, CHAR_SPECIALS, directory / CHAR_DIC_NAME)
    if words is not None:
        _require(words, WORD_SPECIALS, directory / WORD_DIC_NAME)
    try:
        return CharVocabulary(
            chars=chars,
            # EFML's create_one_batch swaps the two: ``bow_id, eow_id = char2id['<eow>'], char2id['<bow>']``
            begin_word=chars["<eow>"],
            end_word=chars["<bow>"],
            padding=chars["<pad>"],
            unknown=chars["<oov>"],
            bos=chars["<bos>"],
            eos=chars["<eos>"],
            bos_token="<bos>",
            eos_token="<eos>",
            words=words,
            word_unknown=0 if words is None else words["<oov>"],
            word_dim=word_dim if words is not None else 0,
        )
    except ValueError as err:
        raise ModelFileError(directory, f"{CHAR_DIC_NAME}/{WORD_DIC_NAME}: {err}") from err


def _require(dic: Dict[str, int], specials: Tuple[str, ...], path: Path) -> None:
    missing = [s for s in specials if s not in dic]
    if missing:
        raise ModelFileError(path, f"lacks the entries {missing} that EFML's batcher needs")


def _take(state: Dict[str, torch.Tensor], name: str, path: Path) -> torch.Tensor:
    if name not in state:
        raise ModelFileError(path, f"tensor {name!r} is missing; is this an EFML {path.name}?")
    return state.pop(name)


def _token_encoder_state(
    state: Dict[str, torch.Tensor], config: BiLMConfig, vocab: CharVocabulary, path: Path
) -> Dict[str, torch.Tensor]:
    state = dict(state)
    ours = {"token_encoder.char_embedding.weight": _take(state, "char_emb_layer.embedding.weight", path)}
    if vocab.words is not None:
        ours["token_encoder.word_embedding.weight"] = _take(state, "word_emb_layer.embedding.weight", path)
    for i in range(len(config.filters)):
        for part in ("weight", "bias"):
            ours[f"token_encoder.convolutions.{i}.{part}"] = _take(state, f"convolutions.{i}.{part}", path)
    n = config.n_filters
    for k in range(config.n_highway):
        weight = _take(state, f"highways._layers.{k}.weight", path)
        bias = _take(state, f"highways._layers.{k}.bias", path)
        if weight.shape != (2 * n, n) or bias.shape != (2 * n,):
            raise ModelFileError(path, f"highway layer {k} has shape {tuple(weight.shape)}, expected {(2 * n, n)}")
        # EFML: x <- g * x + (1 - g) * relu(W_h x), g = sigmoid(W_g x); ours gates the transform:
        # x <- t * relu(W_h x) + (1 - t) * x with t = sigmoid(-W_g x) = 1 - g
        ours[f"token_encoder.highway.transform.{k}.weight"] = weight[:n]
        ours[f"token_encoder.highway.transform.{k}.bias"] = bias[:n]
        ours[f"token_encoder.highway.carry.{k}.weight"] = -weight[n:]
        ours[f"token_encoder.highway.carry.{k}.bias"] = -bias[n:]
    for part in ("weight", "bias"):
        ours[f"token_encoder.projection.{part}"] = _take(state, f"projection.{part}", path)
    _refuse_leftovers(state, path)
    return ours


def _encoder_state(state: Dict[str, torch.Tensor], config: BiLMConfig, path: Path) -> Dict[str, torch.Tensor]:
    state = dict(state)
    ours: Dict[str, torch.Tensor] = {}
    dim = config.dim
    for direction in ("forward", "backward"):
        for layer in range(config.n_layers):
            theirs, mine = f"{direction}_layer_{layer}", f"{direction}_lstm.layers.{layer}"
            input_weight = _take(state, f"{theirs}.input_linearity.weight", path)
            state_weight = _take(state, f"{theirs}.state_linearity.weight", path)
            bias = _take(state, f"{theirs}.state_linearity.bias", path)
            for name, value in (("input", input_weight), ("state", state_weight), ("bias", bias)):
                if value.dim() == 0 or value.shape[0] != 4 * dim:
                    rows = f"{value.shape[0] if value.dim() else 0} rows, expected 4 * dim = {4 * dim}"
                    raise ModelFileError(path, f"{theirs} {name} has {rows}")
            gates = _gate_order(dim)  # once the rows are known to be there: dim is the architecture's word
            ours[f"{mine}.input_linearity.weight"] = input_weight[gates]
            ours[f"{mine}.input_linearity.bias"] = bias[gates]
            ours[f"{mine}.state_linearity.weight"] = state_weight[gates]
            ours[f"{mine}.projection.weight"] = _take(state, f"{theirs}.state_projection.weight", path)
    _refuse_leftovers(state, path)
    return ours


def _gate_order(dim: int) -> torch.Tensor:
    """Rows of EFML's [input, forget, cell, output] gate blocks in our order [input, cell, forget, output]."""
    blocks: List[torch.Tensor] = [torch.arange(k * dim, (k + 1) * dim) for k in (0, 2, 1, 3)]
    return torch.cat(blocks)


def _refuse_leftovers(state: Dict[str, torch.Tensor], path: Path) -> None:
    if state:
        names = sorted(state)[:5]
        raise ModelFileError(path, f"unexpected tensors {names}: the architecture JSON does not describe them")


def _clip(value: Any) -> Optional[float]:
    # EFML tests the value's truth: 0 or null means no clipping
    if not value:
        return None
    if float(value) < 0:
        raise ValueError(f"a clip value must not be negative: {value}")
    return float(value)


def _read_json(path: Path) -> Dict[str, Any]:
    return read_json_object(
        path, missing="missing; an EFML model directory holds it", invalid="not valid JSON", not_object="must hold a JSON object"
    )


def export_efml(bilm: BiLM, directory: PathLike) -> Path:
    """Write a biLM with a learned character vocabulary (an imported, perhaps fine-tuned,
    ELMoForManyLangs model) as an EFML model directory: config.json, the architecture JSON,
    char.dic, word.dic, token_embedder.pkl and encoder.pkl (tensors only), the inverse of
    ``load_efml``. A byte-id model (AllenNLP's format) has no EFML form: export it with
    ``export_allennlp``.

    RETURNS (Path): the directory.
    """
    vocab = bilm.char_vocab
    if vocab is None:
        raise ValueError("this biLM reads byte ids (AllenNLP's scheme), which ELMoForManyLangs' format cannot "
                         "express; export it with export_allennlp")
    config = bilm.config
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    architecture_name = f"cnn_{config.char_embedding_dim}_{config.projection_dim}_{config.dim}_{config.n_layers}.json"
    architecture = {
        "encoder": {"name": "elmo", "projection_dim": config.projection_dim, "cell_clip": config.cell_clip or 0,
                    "proj_clip": config.proj_clip or 0, "dim": config.dim, "n_layers": config.n_layers},
        "token_embedder": {"name": "cnn", "activation": config.activation, "filters": [list(f) for f in config.filters],
                           "n_highway": config.n_highway, "word_dim": vocab.word_dim,
                           "char_dim": config.char_embedding_dim,
                           "max_characters_per_token": config.max_characters_per_token},
        "classifier": {"name": "sampled_softmax", "n_samples": 8192},
        "dropout": 0.1,
    }
    write_atomic(directory / architecture_name, json.dumps(architecture, indent=2).encode("utf-8"))
    write_atomic(directory / CONFIG_NAME, json.dumps({"config_path": architecture_name}).encode("utf-8"))
    write_atomic(directory / CHAR_DIC_NAME, _dic_text(vocab.chars))
    if vocab.words is not None:
        write_atomic(directory / WORD_DIC_NAME, _dic_text(vocab.words))
    state = {name: value.detach().float().cpu() for name, value in bilm.state_dict().items()}
    _save_tensors(directory / TOKEN_EMBEDDER_NAME, _efml_token_embedder(state, config, vocab))
    _save_tensors(directory / ENCODER_NAME, _efml_encoder(state, config))
    return directory


def _dic_text(entries: Dict[str, int]) -> bytes:
    return "".join(f"{key}\t{index}\n" for key, index in sorted(entries.items(), key=lambda kv: kv[1])).encode("utf-8")


def _save_tensors(path: Path, tensors: Dict[str, torch.Tensor]) -> None:
    buffer = io.BytesIO()
    torch.save(OrderedDict((name, value.contiguous()) for name, value in tensors.items()), buffer)
    write_atomic(path, buffer.getvalue())


def _efml_token_embedder(state: Dict[str, torch.Tensor], config: BiLMConfig, vocab: CharVocabulary) -> Dict[str, torch.Tensor]:
    theirs = {"char_emb_layer.embedding.weight": state["token_encoder.char_embedding.weight"]}
    if vocab.words is not None:
        theirs["word_emb_layer.embedding.weight"] = state["token_encoder.word_embedding.weight"]
    for i in range(len(config.filters)):
        for part in ("weight", "bias"):
            theirs[f"convolutions.{i}.{part}"] = state[f"token_encoder.convolutions.{i}.{part}"]
    for k in range(config.n_highway):  # EFML's gate is the complement of our transform gate (see _token_encoder_state)
        theirs[f"highways._layers.{k}.weight"] = torch.cat(
            [state[f"token_encoder.highway.transform.{k}.weight"], -state[f"token_encoder.highway.carry.{k}.weight"]])
        theirs[f"highways._layers.{k}.bias"] = torch.cat(
            [state[f"token_encoder.highway.transform.{k}.bias"], -state[f"token_encoder.highway.carry.{k}.bias"]])
    for part in ("weight", "bias"):
        theirs[f"projection.{part}"] = state[f"token_encoder.projection.{part}"]
    return theirs


def _efml_encoder(state: Dict[str, torch.Tensor], config: BiLMConfig) -> Dict[str, torch.Tensor]:
    theirs: Dict[str, torch.Tensor] = {}
    gates = _gate_order(config.dim)  # swapping the middle two blocks is its own inverse
    for direction in ("forward", "backward"):
        for layer in range(config.n_layers):
            name, mine = f"{direction}_layer_{layer}", f"{direction}_lstm.layers.{layer}"
            theirs[f"{name}.input_linearity.weight"] = state[f"{mine}.input_linearity.weight"][gates]
            theirs[f"{name}.state_linearity.weight"] = state[f"{mine}.state_linearity.weight"][gates]
            theirs[f"{name}.state_linearity.bias"] = state[f"{mine}.input_linearity.bias"][gates]
            theirs[f"{name}.state_projection.weight"] = state[f"{mine}.projection.weight"]
    return theirs
