"""Hostile file contents for the untrusted-file tests: pickles that would leave a marker file if
anything unpickled them, and a scan of the package source for code that unpickles."""
import ast
import io
import pickle
from pathlib import Path
from typing import Callable, Dict, List

import numpy as np
import torch

PACKAGE = Path(__file__).resolve().parent.parent.parent / "spacy_elmo"
# modules whose loaders run code from the data they read
UNPICKLING_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "joblib", "shelve", "marshal"}


class Payload:
    """Unpickling this object calls open(marker, "w"): the marker file appears iff it ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _torch_zip(marker: Path) -> bytes:
    buffer = io.BytesIO()
    torch.save({"weight": Payload(marker)}, buffer)  # what a renamed pytorch_model.bin would hold
    return buffer.getvalue()


def _object_npy(marker: Path) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.array([Payload(marker)], dtype=object), allow_pickle=True)
    return buffer.getvalue()


def payloads(marker: Path) -> Dict[str, bytes]:
    """Each way a file can carry a pickle: raw (protocols 0 and 5), inside torch's zip, inside .npy."""
    makers: Dict[str, Callable[[], bytes]] = {
        "pickle-0": lambda: pickle.dumps(Payload(marker), protocol=0),
        "pickle-5": lambda: pickle.dumps(Payload(marker), protocol=5),
        "torch.save": lambda: _torch_zip(marker),
        "npy-object": lambda: _object_npy(marker),
    }
    return {name: make() for name, make in makers.items()}


def unpickling_calls(source: str, filename: str = "<string>") -> List[str]:
    """Places in Python source that unpickle or run code from data: imports of pickle-like modules,
    ``torch.load`` without ``weights_only=True``, ``np.load(..., allow_pickle=<not False>)``,
    ``torch.jit.load``, ``eval``/``exec``. Comments and strings are not code, so they never match.

    RETURNS (List[str]): "file:line: what" for each.
    """
    found: List[str] = []
    for node in ast.walk(ast.parse(source, filename)):
        where = f"{filename}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found += [f"{where}: import {a.name}" for a in node.names if a.name.split(".")[0] in UNPICKLING_MODULES]
        elif isinstance(node, ast.ImportFrom):
            module = (node.module or "").split(".")[0]
            if module in UNPICKLING_MODULES:
                found.append(f"{where}: from {node.module} import ...")
            elif module in ("torch", "numpy") and any(a.name == "load" for a in node.names):
                found.append(f"{where}: from {node.module} import load")
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            keywords = {k.arg: k.value for k in node.keywords}
            weights_only = keywords.get("weights_only")
            if name in ("torch.load", "torch.serialization.load") and not _is_constant(weights_only, True):
                found.append(f"{where}: {name} without weights_only=True")
            elif name in ("np.load", "numpy.load") and "allow_pickle" in keywords:
                if not _is_constant(keywords["allow_pickle"], False):
                    found.append(f"{where}: {name} with allow_pickle")
            elif name in ("torch.jit.load", "eval", "exec", "__import__"):
                found.append(f"{where}: {name}")
    return found


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _is_constant(node, value) -> bool:
    return isinstance(node, ast.Constant) and node.value is value
