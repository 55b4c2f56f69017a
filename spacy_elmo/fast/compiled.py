"""The lockstep pair's timestep loop in C++, compiled for this CPU on first use.

One sentence at a time, an LSTM timestep of a small model is a few microseconds of arithmetic
and about fifty torch operator calls from Python, each costing microseconds of dispatch
(bench/profile_step.py). ``csrc/lstmp_steps.cpp`` runs the loop of ``in_place.run_in_place`` for
float32 paired weights in one call: per timestep the recurrent product (``baddbmm``), one
vectorized loop for the gates, cell and hidden state (``csrc/cell_math.cpp``: tanh(x) =
2 * sigmoid(2x) - 1 as in the Python fused step, exp written out so that the compiler vectorizes
it) and the projection (``bmm``). Its outputs are as close to the plain float32 model as the
Python fused step's (both about 1e-6 on the test fixtures).

The library is built with the system's C++ compiler (``$CXX``, else ``c++``/``g++``) against
the installed torch, with ``-march=native``, into ``$SPACY_ELMO_CACHE/kernels`` (default
``~/.cache/spacy_elmo/kernels``; ``$SPACY_ELMO_KERNELS`` sets the folder itself) under a name that hashes the sources, the torch version,
the compiler and the CPU: once per machine (seconds to a minute). Where it cannot be built (no compiler,
no torch headers, not Linux or macOS) the Python loop runs instead, with one warning, and a
marker file keeps later processes from trying again (``python -m spacy_elmo kernels --build``
retries). ``SPACY_ELMO_COMPILED=0`` turns it off. ``dispatch.py`` decides when it runs: only for a
runner that is not ``exact``.
"""
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

from ..bilm.lstm import LSTMPLayer, State
from .in_place import final_hidden

ENV = "SPACY_ELMO_COMPILED"  # "0": never build or load the compiled step
DIR_ENV = "SPACY_ELMO_KERNELS"  # where built kernels go (default: the cache's kernels/)
CSRC = Path(__file__).parent / "csrc"
SOURCES = ("cell_math.cpp", "lstmp_steps.cpp")
# the elementwise loop needs no torch headers; these two flags let the compiler vectorize it (no
# errno to set, no floating-point exceptions to keep) and change no result
PLAIN_SOURCES = {"cell_math.cpp": ["-fno-math-errno", "-fno-trapping-math"]}
_LOCK = threading.Lock()
_STATE: Dict[str, object] = {"op": None, "tried": False, "error": None}


class KernelBuildError(RuntimeError):
    """The compiled step could not be built or loaded here."""


def kernel_dir() -> Path:
    """Where built kernels are kept: ``$SPACY_ELMO_KERNELS``, else ``$SPACY_ELMO_CACHE/kernels``,
    else under ``$XDG_CACHE_HOME/spacy_elmo`` or ``~/.cache/spacy_elmo`` (the download cache's root)."""
    if os.environ.get(DIR_ENV):
        return Path(os.environ[DIR_ENV]).expanduser()
    root = os.environ.get("SPACY_ELMO_CACHE")
    if not root:
        root = str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "spacy_elmo")
    return Path(root).expanduser() / "kernels"


def enabled() -> bool:
    """Whether the compiled step may be used (not switched off by the environment)."""
    return os.environ.get(ENV, "1") != "0"


def compiled_step(build: bool = True) -> Optional[Callable]:
    """``torch.ops.spacy_elmo.lstmp_steps``, loaded (and built if missing and ``build``), or None
    where it is switched off or cannot be had (then one warning says why)."""
    if not enabled():
        return None
    if _STATE["op"] is not None or _STATE["tried"]:
        return _STATE["op"]  # type: ignore[return-value]
    with _LOCK:
        if not _STATE["tried"]:
            try:
                _STATE["op"] = load(build=build)
            except KernelBuildError as error:
                _STATE["error"] = str(error)
                warnings.warn(f"the compiled LSTM step is not available ({error}); running the Python step",
                              RuntimeWarning, stacklevel=3)
            _STATE["tried"] = True
    return _STATE["op"]  # type: ignore[return-value]


def load(build: bool = True, force: bool = False) -> Callable:
    """Load the library for this machine, building it first if it is missing (or ``force``).

    A process loads one such library: after the first, a new build is used by new processes.
    RETURNS (Callable): the op. Raises KernelBuildError where it cannot be built or loaded.
    """
    path = library_path()
    failed = path.with_suffix(".failed")
    if force or not path.exists():
        if failed.exists() and not force:
            raise KernelBuildError(f"an earlier build failed, see {failed}; `python -m spacy_elmo kernels --build` retries")
        if not build:
            raise KernelBuildError(f"not built yet: {path}")
        _build(path, failed)
    if not _loaded():
        try:
            torch.ops.load_library(str(path))
        except (OSError, RuntimeError) as error:
            path.unlink(missing_ok=True)  # a damaged or foreign file: built afresh next time
            raise KernelBuildError(f"could not load {path}: {error}") from error
    return torch.ops.spacy_elmo.lstmp_steps


def _loaded() -> bool:
    return hasattr(torch.ops.spacy_elmo, "lstmp_steps")


def library_path() -> Path:
    """The library's path for these sources, this torch, this compiler and this CPU."""
    key = hashlib.sha256()
    for name in SOURCES:
        key.update((CSRC / name).read_bytes())
    flags = " ".join(" ".join(flags) for flags in PLAIN_SOURCES.values())
    for part in (torch.__version__, sys.platform, platform.machine(), _compiler_version(), _cpu_identity(), flags):
        key.update(part.encode("utf-8", "replace"))
    return kernel_dir() / f"lstmp_steps-{key.hexdigest()[:16]}.so"


def _build(path: Path, failed: Path) -> None:
    """Compile and link into a temporary folder beside ``path``, then move the library into place.
    Every failure (no compiler, a compiler error, a folder that cannot be written) is a
    KernelBuildError, recorded in ``failed`` where that can be written."""
    compiler = _compiler()
    if compiler is None or sys.platform not in ("linux", "darwin"):
        raise KernelBuildError("no C++ compiler found (set $CXX)" if compiler is None else f"not built on {sys.platform}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        print(f"spacy_elmo: compiling the LSTM step for this CPU into {path.parent} (once per machine)",
              file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(dir=path.parent, prefix=".build-") as work:
            for command in build_commands(compiler, Path(work), Path(work) / path.name):
                done = subprocess.run(command, capture_output=True, text=True, timeout=600)
                if done.returncode != 0:
                    _record(failed, " ".join(command) + "\n" + done.stdout + done.stderr)
                    raise KernelBuildError(f"{Path(command[0]).name} failed, see {failed}")
            os.replace(Path(work) / path.name, path)
    except (OSError, subprocess.TimeoutExpired) as error:
        _record(failed, f"{error}\n")
        raise KernelBuildError(f"could not build into {path.parent}: {error}") from error
    failed.unlink(missing_ok=True)


def _record(failed: Path, text: str) -> None:
    try:
        failed.write_text(text, encoding="utf-8")
    except OSError:
        pass  # an unwritable folder: the warning still says why


def build_commands(compiler: str, work: Path, library: Path) -> List[List[str]]:
    """The compiler calls that build ``library``: one per source, then the link."""
    from torch.utils import cpp_extension

    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    common = ["-O3", "-march=native", "-fPIC", "-std=c++20", "-w", f"-D_GLIBCXX_USE_CXX11_ABI={abi}"]
    includes = [f"-I{p}" for p in cpp_extension.include_paths()]
    commands, objects = [], []
    for name in SOURCES:
        obj = work / (name + ".o")
        extra = PLAIN_SOURCES.get(name, includes)
        commands.append([compiler, *common, *extra, "-c", str(CSRC / name), "-o", str(obj)])
        objects.append(str(obj))
    libs = cpp_extension.library_paths()
    link = [compiler, "-shared", *objects, "-o", str(library), *(f"-L{p}" for p in libs)]
    link += [*(f"-Wl,-rpath,{p}" for p in libs), "-lc10", "-ltorch_cpu"]
    commands.append(link + ["-lm"])
    return commands


def _compiler() -> Optional[str]:
    for name in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _compiler_version() -> str:
    compiler = _compiler()
    if compiler is None:
        return "none"
    try:
        return subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def _cpu_identity() -> str:
    """The CPU's model name and flags (the code is built with -march=native)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            lines = [line for line in cpuinfo if line.startswith(("model name", "flags", "Features"))]
        return "".join(sorted(set(lines)))
    except OSError:
        return platform.processor()


def status() -> Dict[str, object]:
    """What ``python -m spacy_elmo kernels`` reports: the library's path and whether it is built,
    loaded, switched off, or failed (with the reason)."""
    path = library_path()
    failed = path.with_suffix(".failed")
    return {
        "library": str(path),
        "built": path.exists(),
        "loaded": _loaded(),
        "enabled": enabled(),
        "failed": failed.read_text(encoding="utf-8", errors="replace")[-2000:] if failed.exists() else None,
        "compiler": _compiler(),
    }


def usable(projected: torch.Tensor) -> bool:
    """Whether a lockstep pair may take the compiled loop for ``projected``."""
    return (
        projected.device.type == "cpu"
        and projected.dtype == torch.float32
        and projected.is_contiguous()
        and compiled_step() is not None
    )


def run_pair_compiled(
    layers: Sequence[LSTMPLayer],
    projected: torch.Tensor,
    batch_sizes: Sequence[int],
    states: Sequence[State],
    paired: Tuple[torch.Tensor, torch.Tensor],
) -> Tuple[torch.Tensor, List[State]]:
    """``in_place.run_in_place(layers, projected, batch_sizes, states, paired, packed=True, fused=True)``, with the
    timestep loop in C++ (check ``usable`` first). Same arguments and results."""
    layer = layers[0]
    h0 = torch.stack([h for h, _ in states])
    cell = torch.stack([c for _, c in states])
    sizes = [int(n) for n in batch_sizes]
    out = projected.new_zeros(len(sizes), len(layers), h0.shape[1], layer.projection_dim)
    compiled_step()(projected, h0, cell, sizes, paired[0], paired[1], layer.cell_clip, layer.proj_clip, out)
    finals = [(final_hidden(out[:, d], h0[d], sizes), cell[d]) for d in range(len(layers))]
    return out, finals
