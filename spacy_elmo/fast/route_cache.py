"""The fp32 routes chosen on this machine, kept across processes (``payoff.choose_routes``), and
beside them fine-tuning's training precision (``train_payoff.choose``: ``read_entry``/``write_entry``).

Timing the two routes takes seconds for the full published model, and when they run close, two
processes that each measure can choose differently, so that the same text gets vectors that differ
at float32 rounding level between them. The first choice for a model shape is therefore written
to ``routes.json`` in the kernel folder (``kernel_library.kernel_dir()``, per machine like the
kernels built there) and later processes read it instead of measuring. An entry is keyed by what
the choice depends on: the CPU's model name and flags, torch's version (its MKL and oneDNN), the
libraries' instruction-set switches in the environment (``SWITCHES``), the thread count, the model's
LSTM shape and how the choice is made; anything else measures anew.
``python -m spacy_elmo kernels --routes`` measures again and replaces the entry (for a choice
measured while the machine was busy); deleting the file forgets every choice.

The file is JSON only, read strictly: one that does not parse, or an entry that is not a choice
this version makes, is measured over and rewritten, with a warning naming the file; a folder that
cannot be written leaves the choice in this process only, with a warning.
"""
import hashlib
import json
import os
import platform
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

import torch

from ..files import write_atomic
from . import kernel_library, prepacked
from .kernel_variants import cpu_flags

FILE = "routes.json"
# environment variables that change which instructions MKL, oneDNN or ATen use, and so the routes' speed
SWITCHES = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS", "MKL_DEBUG_CPU_TYPE", "MKL_CBWR", "ATEN_CPU_CAPABILITY")
FORMAT = 1
_WARNED: set = set()


def path() -> Path:
    """Where the choices are kept: ``routes.json`` in the kernel folder."""
    return kernel_library.kernel_dir() / FILE


def machine_key(shape: Tuple, method: str) -> str:
    """The entry's key: the CPU, torch, the thread count (in ``shape``), the LSTM shape, the method."""
    flags = hashlib.sha256(" ".join(sorted(cpu_flags())).encode()).hexdigest()[:16]
    switches = ",".join(f"{name}={os.environ[name]}" for name in SWITCHES if os.environ.get(name))
    parts = [cpu_model(), f"flags {flags}", f"torch {torch.__version__}", f"switches {switches or 'none'}",
             "shape " + "x".join(map(str, shape)), method]
    return " | ".join(parts)


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def read(key: str) -> Optional[Tuple[prepacked.Routes, Dict[str, Any]]]:
    """The routes kept for ``key`` and what was measured for them, or None (then measure)."""
    entry = read_entry(key, lambda entry: True)
    if entry is None:
        return None
    try:
        routes = prepacked.Routes(**{regime: entry["routes"][regime] for regime in prepacked.Routes._fields})
        measured = dict(entry["measured"])
    except (KeyError, TypeError, AttributeError):
        _warn(f"{path()} has an entry that is not a route choice; measuring again and replacing it")
        return None
    if any(route not in prepacked.ROUTES for route in routes):
        _warn(f"{path()} names a route this version does not have ({tuple(routes)}); measuring again")
        return None
    return routes, measured


def write(key: str, routes: prepacked.Routes, measured: Dict[str, Any]) -> None:
    """Keep the choice for ``key`` (other entries stay); a folder that cannot be written: a warning."""
    write_entry(key, {"routes": routes._asdict(), "measured": measured}, what="the fp32 route choice")


def read_entry(key: str, valid: Callable[[Dict[str, Any]], bool]) -> Optional[Dict[str, Any]]:
    """The entry kept for ``key`` where ``valid`` takes it, else None (then measure; an entry it
    refuses is measured over, with a warning)."""
    entries = _entries()
    entry = entries.get(key) if entries is not None else None
    if entry is None:
        return None
    if not isinstance(entry, dict) or not valid(entry):
        _warn(f"{path()} has an entry for this machine that this version does not read; measuring again and replacing it")
        return None
    return entry


def write_entry(key: str, entry: Dict[str, Any], *, what: str) -> bool:
    """Keep ``entry`` for ``key`` (other entries stay); a folder that cannot be written: a warning
    naming ``what`` was chosen. RETURNS (bool): whether it was kept."""
    entries = _entries() or {}
    entries[key] = entry
    target = path()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        document = {"format": FORMAT, "entries": entries}
        write_atomic(target, (json.dumps(document, indent=1, sort_keys=True, allow_nan=False) + "\n").encode("utf-8"))
    except (OSError, ValueError) as error:
        _warn(f"could not keep {what} in {target} ({error}); it holds for this process only")
        return False
    return True


def _entries() -> Optional[Dict[str, Any]]:
    """The file's entries; {} where there is no file; None (with a warning) where it is unreadable."""
    target = path()
    try:
        text = target.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as error:
        _warn(f"could not read the choices kept in {target} ({error}); measuring again")
        return None
    try:
        document = json.loads(text, parse_constant=_refuse_constant)
    except ValueError as error:
        _warn(f"{target} is not valid JSON ({error}); measuring again and rewriting it")
        return None
    if not isinstance(document, dict) or document.get("format") != FORMAT or not isinstance(document.get("entries"), dict):
        _warn(f"{target} is not a choice file of format {FORMAT}; measuring again and rewriting it")
        return None
    return document["entries"]


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _warn(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, RuntimeWarning, stacklevel=_outside_the_package())


def _outside_the_package() -> int:
    """The stacklevel of the first caller outside this package: the warning names the user's line
    (or the command's entry point) rather than a line of the library."""
    package = str(Path(__file__).resolve().parent.parent)
    frame, level = sys._getframe(2), 2
    while frame is not None and str(Path(frame.f_code.co_filename).resolve()).startswith(package + os.sep):
        frame, level = frame.f_back, level + 1
    return level


def forget_warnings() -> None:
    """Warn again about the same file (tests)."""
    _WARNED.clear()
