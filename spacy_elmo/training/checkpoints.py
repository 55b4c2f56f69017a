"""Training checkpoints: everything needed to continue a run exactly, without pickle.

A checkpoint is a directory ``checkpoints/step-NNNNNNNN/`` (the step, 8 digits) holding
``lm.safetensors`` (biLM + softmax), ``training.safetensors`` (optimizer tensors,
torch and numpy RNG states, any carried LSTM state) and ``state.json`` (step,
data position, scalars, Python's RNG state, the SHA-256 of both tensor files).
It is written under a temporary name and renamed into place, so a crash leaves
no half checkpoint; a damaged one (bad checksum or unreadable) is skipped with a
warning in favour of the previous one.
"""
import hashlib
import json
import os
import random
import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from ..files import write_atomic
from ..io.errors import ModelFileError

PREFIX = "step-"
STATE_NAME = "state.json"
LM_NAME = "lm.safetensors"
TRAINING_NAME = "training.safetensors"
FORMAT = "spacy-elmo.checkpoint"


@dataclass
class Checkpoint:
    """A loaded checkpoint. ``position``: data position, e.g. {"epoch": 1, "batch": 37}."""

    path: Path
    step: int
    position: Dict[str, int]
    model: Dict[str, torch.Tensor]
    optimizer: Dict[str, Any]
    rng: Dict[str, Any]
    carry: Dict[str, torch.Tensor] = field(default_factory=dict)
    extra: Dict[str, Any] = field(default_factory=dict)


def rng_state() -> Tuple[Dict[str, torch.Tensor], Dict[str, Any]]:
    """torch / numpy / python RNG states as (tensors, JSON)."""
    version, mt, gauss = random.getstate()
    name, key, pos, has_gauss, cached = np.random.get_state()
    tensors = {"rng.torch": torch.get_rng_state(), "rng.numpy_key": torch.from_numpy(key.astype(np.int64))}
    if torch.cuda.is_available():
        for i, state in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"rng.cuda.{i}"] = state
    json_state = {
        "python": [version, list(mt), gauss],
        "numpy": {"name": name, "pos": int(pos), "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
    }
    return tensors, json_state


def set_rng_state(tensors: Dict[str, torch.Tensor], json_state: Dict[str, Any], *, rank: int = 0) -> None:
    version, mt, gauss = json_state["python"]
    random.setstate((version, tuple(mt), gauss))
    numpy = json_state["numpy"]
    key = tensors["rng.numpy_key"].numpy().astype(np.uint32)
    np.random.set_state((numpy["name"], key, numpy["pos"], numpy["has_gauss"], numpy["cached_gaussian"]))
    torch.set_rng_state(tensors.get(f"rng.torch.r{rank}", tensors["rng.torch"]))
    cuda = [tensors[k] for k in sorted(tensors) if k.startswith("rng.cuda.")]
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda)


def optimizer_state(optimizer: torch.optim.Optimizer) -> Tuple[Dict[str, torch.Tensor], Dict[str, Any]]:
    """An optimizer's state_dict split into tensors (safetensors) and the JSON-able rest."""
    state = optimizer.state_dict()
    tensors: Dict[str, torch.Tensor] = {}
    scalars: Dict[str, Dict[str, Any]] = {}
    for index, values in state["state"].items():
        for key, value in values.items():
            if isinstance(value, torch.Tensor):
                tensors[f"optimizer.{index}.{key}"] = value.detach().cpu().contiguous()
            else:
                scalars.setdefault(str(index), {})[key] = value
    return tensors, {"scalars": scalars, "param_groups": state["param_groups"]}


def restore_optimizer(optimizer: torch.optim.Optimizer, tensors: Dict[str, torch.Tensor], meta: Dict[str, Any]) -> None:
    state: Dict[int, Dict[str, Any]] = {}
    for name, value in tensors.items():
        if name.startswith("optimizer."):
            _, index, key = name.split(".", 2)
            state.setdefault(int(index), {})[key] = value
    for index, values in meta["scalars"].items():
        state.setdefault(int(index), {}).update(values)
    optimizer.load_state_dict({"state": state, "param_groups": meta["param_groups"]})


def save_checkpoint(
    directory: Path,
    *,
    step: int,
    position: Dict[str, int],
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    carry: Optional[Dict[str, torch.Tensor]] = None,
    extra: Optional[Dict[str, Any]] = None,
    keep: int = 3,
    rng_by_rank: Optional[List[torch.Tensor]] = None,
) -> Path:
    """Write ``directory/step-NNNNNNNN`` atomically and delete all but the newest ``keep``.

    carry (Optional[dict]): LSTM state carried between windows, as named tensors.
    rng_by_rank (Optional[List[Tensor]]): each rank's torch RNG state (distributed runs).
    """
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"{PREFIX}{step:08d}"
    tmp = directory / f".{final.name}.tmp-{os.getpid()}"
    # partial checkpoints of killed or failed writes would hold disk space forever
    remove_partial_checkpoints(directory)
    try:
        _write_checkpoint(tmp, final, step, position, model, optimizer, carry, extra, rng_by_rank)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_dir(directory)
    for old in list_checkpoints(directory)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def remove_partial_checkpoints(directory: Path) -> None:
    """Delete the temporary directories that interrupted checkpoint writes left behind."""
    for partial in directory.glob(f".{PREFIX}*.tmp-*"):
        shutil.rmtree(partial, ignore_errors=True)


def _write_checkpoint(
    tmp: Path,
    final: Path,
    step: int,
    position: Dict[str, int],
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    carry: Optional[Dict[str, torch.Tensor]],
    extra: Optional[Dict[str, Any]],
    rng_by_rank: Optional[List[torch.Tensor]],
) -> None:
    tmp.mkdir()
    model_bytes = save_tensors({k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()})
    opt_tensors, opt_meta = optimizer_state(optimizer)
    rng_tensors, rng_json = rng_state()
    # under DDP every rank draws its own dropout masks and softmax samples
    rng_tensors.update({f"rng.torch.r{r}": t for r, t in enumerate(rng_by_rank or [])})
    training = {**opt_tensors, **rng_tensors, **{f"carry.{k}": v.detach().cpu().contiguous() for k, v in (carry or {}).items()}}
    training_bytes = save_tensors(training)
    write_atomic(tmp / LM_NAME, model_bytes)
    write_atomic(tmp / TRAINING_NAME, training_bytes)
    state = {
        "format": FORMAT,
        "step": step,
        "position": position,
        "optimizer": opt_meta,
        "rng": rng_json,
        "extra": extra or {},
        "sha256": {LM_NAME: _sha(model_bytes), TRAINING_NAME: _sha(training_bytes)},
    }
    # state.json last: a directory without it is incomplete by construction
    write_atomic(tmp / STATE_NAME, json.dumps(state).encode("utf-8"))
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)


def newest_extra(directory: Path) -> Dict[str, Any]:
    """The ``extra`` of the newest checkpoint in ``directory`` whose state reads (what the run recorded of
    itself, its tensors not read), or {} where there is none."""
    for path in reversed(list_checkpoints(directory)):
        try:
            state = json.loads((path / STATE_NAME).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if isinstance(state, dict) and state.get("format") == FORMAT and isinstance(state.get("extra"), dict):
            return state["extra"]
    return {}


def list_checkpoints(directory: Path) -> List[Path]:
    """Checkpoint directories, oldest first."""
    if not directory.is_dir():
        return []
    found = [p for p in directory.iterdir() if p.is_dir() and p.name.startswith(PREFIX) and p.name[len(PREFIX) :].isdigit()]
    return sorted(found, key=lambda p: int(p.name[len(PREFIX) :]))


def read_checkpoint(path: Path) -> Checkpoint:
    """Read and verify one checkpoint. Raises ModelFileError (a ValueError) naming the damaged file."""
    current = path / STATE_NAME
    try:
        state = json.loads(current.read_text(encoding="utf-8"))
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            raise ModelFileError(current, "not a spacy-elmo checkpoint state")
        blobs = {}
        for name in (LM_NAME, TRAINING_NAME):
            current = path / name
            data = current.read_bytes()
            if _sha(data) != state["sha256"][name]:
                raise ModelFileError(current, "checksum mismatch: the file is damaged or was replaced")
            blobs[name] = load_tensors(data)
        current = path / STATE_NAME
        int(state["step"])
    except (OSError, KeyError, TypeError, ValueError, UnicodeDecodeError, json.JSONDecodeError, SafetensorError) as err:
        if isinstance(err, ModelFileError):
            raise
        raise ModelFileError(current, f"unreadable ({err})") from err
    training = blobs[TRAINING_NAME]
    return Checkpoint(
        path=path,
        step=int(state["step"]),
        position={k: int(v) for k, v in state["position"].items()},
        model=blobs[LM_NAME],
        optimizer={"tensors": {k: v for k, v in training.items() if k.startswith("optimizer.")}, **state["optimizer"]},
        rng={"tensors": {k: v for k, v in training.items() if k.startswith("rng.")}, "json": state["rng"]},
        carry={k[len("carry.") :]: v for k, v in training.items() if k.startswith("carry.")},
        extra=state.get("extra", {}),
    )


def latest_checkpoint(directory: Path) -> Optional[Checkpoint]:
    """The newest checkpoint that reads back intact; damaged newer ones are skipped with a warning."""
    for path in reversed(list_checkpoints(directory)):
        try:
            return read_checkpoint(path)
        except ValueError as err:
            warnings.warn(f"skipping damaged checkpoint {path}: {err}", RuntimeWarning, stacklevel=2)
    return None


def restore_training_state(
    checkpoint: Checkpoint, model: torch.nn.Module, optimizer: torch.optim.Optimizer, *, rank: int = 0
) -> None:
    """Load weights, optimizer and RNG states from a checkpoint into a freshly built run."""
    model.load_state_dict(checkpoint.model)
    meta = {k: v for k, v in checkpoint.optimizer.items() if k != "tensors"}
    restore_optimizer(optimizer, checkpoint.optimizer["tensors"], meta)
    set_rng_state(checkpoint.rng["tensors"], checkpoint.rng["json"], rank=rank)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fsync_dir(path: Path) -> None:
    handle = os.open(path, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
