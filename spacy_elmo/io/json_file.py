"""A model file's JSON object, read with errors that name the file and say what it should hold."""
import json
from pathlib import Path
from typing import Any, Dict

from .errors import ModelFileError


def read_json_object(path: Path, *, missing: str, invalid: str, not_object: str) -> Dict[str, Any]:
    """The JSON object in ``path``; ModelFileError(path, ...) when it is missing (``missing``), not
    JSON (``invalid``, followed by the parser's reason) or not an object (``not_object``)."""
    path = Path(path)
    if not path.is_file():
        raise ModelFileError(path, missing)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise ModelFileError(path, f"{invalid} ({err})") from err
    if not isinstance(data, dict):
        raise ModelFileError(path, not_object)
    return data
