"""The architecture of an ELMoForManyLangs model: the JSON its ``config.json`` names where that file
is in the model folder, else the published models' values checked against the weights' shapes.

The 44 published zips (``registry.PUBLISHED_ARCHIVES``) hold ``config.json``, ``char.dic``,
``word.dic``, ``token_embedder.pkl``, ``encoder.pkl`` (and NLPL's ``meta.json``), but not the
architecture JSON: their ``config.json`` names it outside the zip, by a path on the authors'
training machine ("/Users/yijialiu/work/projects/conll2018/models/word_elmo/
cnn_50_100_512_4096_sample.json" in the English one, EFML issue #55) or relative to EFML's
repository ("../configs/..."). EFML's README ("Set up the config_path") and issues #19 and #27 have
users copy ``configs/cnn_50_100_512_4096_sample.json`` from EFML's repository into the folder; EFML
>= 0.0.4 falls back to that packaged copy itself (PR #86). Here a ``config_path`` that leaves the
model folder (absolute, or ``..`` escaping it) is never read: a file the model does not hold
does not decide how it runs.

``PUBLISHED_ARCHITECTURE`` is that file's content in EFML's repository
(``elmoformanylangs/configs/cnn_50_100_512_4096_sample.json`` at commit b3de5f1, the code of
elmoformanylangs 0.0.4.post2; ``cnn_0_100_512_4096_sample.json`` beside it holds the same values,
and EFML's authors say every language was trained with the same hyper-parameters, issue #26).
Every value the tensors' shapes determine is checked against them and, where they disagree, taken
from the shapes: the filters (the convolutions' weights), ``char_dim`` and ``word_dim`` (the
embeddings), ``n_highway`` (the highway layers), ``projection_dim`` and ``dim`` (the projection
and the LSTM weights), ``n_layers`` (the LSTM layers). The clips, the CNN's activation and
``max_characters_per_token`` leave no trace in a shape: they are the published values, and the
line printed says so.
"""
import sys
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .errors import ModelFileError
from .json_file import read_json_object

PUBLISHED_ARCHITECTURE_NAME = "cnn_50_100_512_4096_sample.json"
# the architecture files EFML's package ships (configs/), with the same values; a config_path
# naming one of them is what EFML's README tells users to write
PACKAGED_ARCHITECTURE_NAMES = (PUBLISHED_ARCHITECTURE_NAME, "cnn_0_100_512_4096_sample.json")
PUBLISHED_ARCHITECTURE: Dict[str, Dict[str, Any]] = {
    "encoder": {"name": "elmo", "projection_dim": 512, "cell_clip": 3, "proj_clip": 3, "dim": 4096, "n_layers": 2},
    "token_embedder": {
        "name": "cnn",
        "activation": "relu",
        "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
        "n_highway": 2,
        "word_dim": 100,
        "char_dim": 50,
        "max_characters_per_token": 50,
    },
}
# what no tensor's shape tells: always the published values where there is no architecture JSON
NOT_IN_SHAPES = (("encoder", "cell_clip"), ("encoder", "proj_clip"), ("token_embedder", "activation"),
                 ("token_embedder", "max_characters_per_token"))
# what the shapes tell, in the order the line names them
FROM_SHAPES = (("token_embedder", "char_dim"), ("token_embedder", "word_dim"), ("token_embedder", "filters"),
               ("token_embedder", "n_highway"), ("encoder", "projection_dim"), ("encoder", "dim"),
               ("encoder", "n_layers"))
Shapes = Mapping[str, Sequence[int]]


def read_architecture(
    directory: Path, config_path: Path, named: str, *, embedder: Shapes, encoder: Shapes, label: Optional[Union[str, Path]] = None
) -> Tuple[Dict[str, Any], Path]:
    """The architecture of the model in ``directory``.

    config_path (Path): its config.json (named in errors).
    named (str): config.json's ``config_path``.
    embedder, encoder (Mapping[str, Sequence[int]]): the shapes of the tensors in
        token_embedder.pkl and encoder.pkl, by name.
    label (Optional[Union[str, Path]]): what the line names (default: ``directory``).
    RETURNS (Tuple[dict, Path]): the architecture, and the file it came from (config.json where
        no architecture JSON was read; a line on stderr then says what came from where).
    """
    found, outside = _in_folder(directory, named)
    if found is not None:
        return _read_json_architecture(found), found
    base = _base_name(named)
    if not outside and base not in PACKAGED_ARCHITECTURE_NAMES:
        # the model names a file of its own folder that is gone: its clips are not known
        raise ModelFileError(
            config_path,
            f"the architecture JSON it names ({named!r}) is missing from {directory}; it is not one of the "
            f"files EFML ships in its configs/ folder ({', '.join(PACKAGED_ARCHITECTURE_NAMES)}), so put "
            "the model's own file back",
        )
    architecture, inferred = architecture_from_shapes(embedder, encoder, path=directory)
    print(f"{label or directory}: {describe(named, outside=outside, inferred=inferred)}", file=sys.stderr)
    return architecture, config_path


def architecture_from_shapes(
    embedder: Shapes, encoder: Shapes, *, path: Path
) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """The published architecture with every value the tensors' shapes determine checked, and
    taken from the shapes where they disagree.

    RETURNS (Tuple[dict, dict]): the architecture, and the values taken from the shapes
        ("section.field" -> value; empty where the published values fit every shape).
    """
    architecture = {section: dict(values) for section, values in PUBLISHED_ARCHITECTURE.items()}
    measured = shape_values(embedder, encoder, path=path)
    inferred: Dict[str, Any] = {}
    for section, field in FROM_SHAPES:
        if architecture[section][field] != measured[field]:
            inferred[f"{section}.{field}"] = measured[field]
            architecture[section][field] = measured[field]
    return architecture, inferred


def shape_values(embedder: Shapes, encoder: Shapes, *, path: Path) -> Dict[str, Any]:
    """What the tensors of token_embedder.pkl and encoder.pkl say of the architecture (EFML's
    ``ConvTokenEmbedder`` and ``ElmobiLm`` names), each shape checked against the others.

    path (Path): the model folder, for errors.
    RETURNS (Dict[str, Any]): char_dim, word_dim, filters, n_highway, projection_dim, dim, n_layers.
    """
    embedder_path, encoder_path = path / "token_embedder.pkl", path / "encoder.pkl"
    if any(name.startswith("char_lstm.") for name in embedder):
        raise ModelFileError(embedder_path, "holds a character LSTM token embedder, which is not supported: only EFML's 'cnn'")
    char = embedder.get("char_emb_layer.embedding.weight")
    if char is None:
        raise ModelFileError(embedder_path, "has no character embedding: a model without a character CNN (words only) "
                                            "is not supported")
    word = embedder.get("word_emb_layer.embedding.weight")
    values: Dict[str, Any] = {"char_dim": _dim(char, 2, 1, "char_emb_layer", embedder_path),
                              "word_dim": _dim(word, 2, 1, "word_emb_layer", embedder_path) if word is not None else 0}
    filters: List[List[int]] = []
    while (conv := embedder.get(f"convolutions.{len(filters)}.weight")) is not None:
        name = f"convolutions.{len(filters)}.weight"
        if len(conv) != 3 or conv[1] != values["char_dim"]:
            raise ModelFileError(embedder_path, f"{name} has shape {tuple(conv)}: expected (filters, char_dim "
                                                f"{values['char_dim']}, width)")
        filters.append([int(conv[2]), int(conv[0])])
    if not filters:
        raise ModelFileError(embedder_path, "has no convolutions.0.weight: not EFML's character CNN")
    values["filters"] = filters
    values["n_highway"] = _count(embedder, "highways._layers.{}.weight")
    projection = embedder.get("projection.weight")
    n_features = values["word_dim"] + sum(n for _, n in filters)
    if projection is None or len(projection) != 2 or projection[1] != n_features:
        shape = "is missing" if projection is None else f"has shape {tuple(projection)}"
        raise ModelFileError(embedder_path, f"projection.weight {shape}: expected (projection_dim, word_dim + "
                                            f"filters = {n_features})")
    values["projection_dim"] = int(projection[0])
    values["n_layers"] = _count(encoder, "forward_layer_{}.input_linearity.weight")
    first = encoder.get("forward_layer_0.input_linearity.weight")
    if first is None:
        raise ModelFileError(encoder_path, "has no forward_layer_0.input_linearity.weight: not EFML's 'elmo' encoder")
    if len(first) != 2 or first[0] % 4 or first[1] != values["projection_dim"]:
        raise ModelFileError(encoder_path, f"forward_layer_0.input_linearity.weight has shape {tuple(first)}: "
                                           f"expected (4 * dim, projection_dim {values['projection_dim']})")
    values["dim"] = int(first[0]) // 4
    return values


def describe(named: str, *, outside: bool, inferred: Mapping[str, Any]) -> str:
    """The one line that says where an architecture without its JSON came from."""
    published = PUBLISHED_ARCHITECTURE_NAME[: -len(".json")]
    if inferred:
        taken = ", ".join(f"{key.split('.')[1]} {value}" for key, value in inferred.items())
        line = (f"architecture: {published}'s published values, except what the weights' shapes say "
                f"otherwise ({taken})")
    else:
        line = f"architecture: {published}'s published values, checked against the weights' shapes"
    assumed = ", ".join(f"{field} {PUBLISHED_ARCHITECTURE[section][field]}" for section, field in NOT_IN_SHAPES)
    line += f"; {assumed} are the published values (no shape tells them)"
    where = "names a file outside the model and was not read" if outside else "is not in the model folder"
    line += f"; config_path {named!r} {where}"
    if _base_name(named) not in PACKAGED_ARCHITECTURE_NAMES:
        line += f" (it is not {PUBLISHED_ARCHITECTURE_NAME}: the values no shape tells may not be this model's)"
    return line


def _in_folder(directory: Path, named: str) -> Tuple[Optional[Path], bool]:
    """The architecture JSON inside ``directory`` that ``named`` leads to, as EFML looks (the path
    relative to the folder, then its base name in the folder), never a file outside the folder.

    RETURNS (Tuple[Optional[Path], bool]): the file (None: not in the folder), and whether
        ``named`` points outside the folder (absolute, or escaping it with "..").
    """
    outside = _points_outside(named)
    candidates = [] if outside else [directory / named]
    candidates.append(directory / _base_name(named))
    root = directory.resolve()
    for candidate in candidates:
        # a symbolic link out of the folder is outside it too
        if candidate.is_file() and candidate.resolve().is_relative_to(root):
            return candidate, outside
    return None, outside


def _points_outside(named: str) -> bool:
    """Whether a config_path leaves the model folder: absolute (POSIX or Windows), or ".." climbing
    above it."""
    if PurePosixPath(named).is_absolute() or PureWindowsPath(named).is_absolute() or PureWindowsPath(named).drive:
        return True
    depth = 0
    for part in named.replace("\\", "/").split("/"):
        depth += -1 if part == ".." else 0 if part in ("", ".") else 1
        if depth < 0:
            return True
    return False


def _base_name(named: str) -> str:
    return named.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]


def _read_json_architecture(path: Path) -> Dict[str, Any]:
    architecture = read_json_object(path, missing="missing", invalid="not valid JSON", not_object="must hold a JSON object")
    for section in ("encoder", "token_embedder"):
        if not isinstance(architecture.get(section), dict):
            raise ModelFileError(path, f"has no {section!r} section; is this EFML's architecture JSON?")
    return architecture


def _dim(shape: Sequence[int], rank: int, axis: int, name: str, path: Path) -> int:
    if len(shape) != rank:
        raise ModelFileError(path, f"{name} has shape {tuple(shape)}, expected {rank} dimensions")
    return int(shape[axis])


def _count(shapes: Shapes, pattern: str) -> int:
    """How many consecutive layers 0, 1, ... have a tensor named by ``pattern``."""
    count = 0
    while pattern.format(count) in shapes:
        count += 1
    return count
