"""``vectors.json`` beside a model's weights: its default token vectors (``bilm.VectorSetting``).

The file names the SHA-256 of the weights it was made for, the weight of each layer, each
layer's mean over a corpus (subtracted before mixing) and its provenance. It is JSON (read with
``json``, never unpickled). A model directory without one gives the plain mean of the layers.
"""
import json
from pathlib import Path
from typing import Any, Dict, Optional, Union

import numpy as np

from ..files import write_atomic
from ..bilm.vector_setting import VectorSetting
from .errors import ModelFileError
from .json_file import read_json_object

PathLike = Union[str, Path]
VECTORS_NAME = "vectors.json"
FORMAT = "spacy-elmo.vectors"
FORMAT_VERSION = 1


def setting_to_json(setting: VectorSetting) -> Dict[str, Any]:
    """RETURNS (Dict[str, Any]): the setting as the JSON object ``vectors.json`` holds (and the
    ``elmo`` component keeps in its cfg)."""
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "weights_sha256": setting.weights_sha256,
        "layer_weights": list(setting.layer_weights),
        "layer_means": None if setting.layer_means is None else [[float(x) for x in row] for row in setting.layer_means],
        "provenance": setting.provenance,
    }


def setting_from_json(data: Dict[str, Any], *, source: PathLike) -> VectorSetting:
    """Read what ``setting_to_json`` wrote. source (PathLike): names the file in errors.
    RETURNS (VectorSetting): the setting."""
    if data.get("format") != FORMAT:
        raise ModelFileError(source, f"not a spacy-elmo vectors file (expected format {FORMAT!r})")
    if not isinstance(data.get("format_version"), int) or data["format_version"] > FORMAT_VERSION:
        raise ModelFileError(source, "written by a newer spacy-elmo; upgrade the package to read it")
    try:
        return VectorSetting(
            layer_weights=tuple(data["layer_weights"]),
            layer_means=None if data["layer_means"] is None else np.asarray(data["layer_means"], dtype=np.float32),
            weights_sha256=str(data["weights_sha256"]),
            provenance=dict(data.get("provenance") or {}),
        )
    except (KeyError, TypeError, ValueError) as err:
        raise ModelFileError(source, f"bad vector setting ({type(err).__name__}: {err})") from err


def read_vector_setting(directory: PathLike, *, weights_sha256: str, n_layers: int, width: int) -> Optional[VectorSetting]:
    """The vector setting stored in a model directory, checked against the weights beside it.

    weights_sha256 (str): the SHA-256 of the directory's weights.
    n_layers, width (int): the biLM's output layers (L+1) and their width.
    RETURNS (Optional[VectorSetting]): None when the directory has no ``vectors.json``.
    """
    path = Path(directory) / VECTORS_NAME
    if not path.exists():
        return None
    data = read_json_object(
        path, missing="not a file", invalid="not valid JSON", not_object="expected a JSON object (a vector setting)"
    )
    setting = setting_from_json(data, source=path)
    if setting.weights_sha256 != weights_sha256:
        raise ModelFileError(
            path,
            f"made for weights with SHA-256 {setting.weights_sha256[:12]}..., but the weights beside it have "
            f"{weights_sha256[:12]}...: it belongs to other weights; delete it (the model then gives the mean "
            "of the layers) or make it again for these weights (python -m spacy_elmo vectors --model DIR --wic WIC "
            "--write chooses one by WiC accuracy; or spacy_elmo.bilm.VectorSetting)",
        )
    if setting.n_layers != n_layers or setting.width not in (None, width):
        raise ModelFileError(
            path, f"holds {setting.n_layers} layers of width {setting.width}, the biLM has {n_layers} of width {width}"
        )
    return setting


def write_vector_setting(setting: VectorSetting, directory: PathLike) -> Path:
    """Write ``vectors.json`` into a model directory. RETURNS (Path): the file."""
    path = Path(directory) / VECTORS_NAME
    write_atomic(path, (json.dumps(setting_to_json(setting), indent=1) + "\n").encode("utf-8"))
    return path
