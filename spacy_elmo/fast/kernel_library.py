"""The kernel library (``csrc/``): compiled for this CPU on first use, cached, verified, loaded.

One shared library holds every C++ kernel: the lockstep pair's timestep loop (``compiled.py``), the
bf16 products of a few rows (``bf16_rows.py``) and the int8 products of rows quantized on their own
(``int8_rows.py``). Each of them asks ``library()`` for it; none of them builds or loads it.

The library is built with the system's C++ compiler (``$CXX``, else ``c++``/``g++``) against
the installed torch, with ``-march=native``, into ``$SPACY_ELMO_CACHE/kernels`` (default
``~/.cache/spacy_elmo/kernels``; ``$SPACY_ELMO_KERNELS`` sets the folder itself) under a name that hashes the sources, the torch version,
the compiler and the CPU: once per machine (seconds to a minute). Where it cannot be built (no compiler,
no torch headers, not Linux or macOS) the Python loop runs instead, with one warning, and a
marker file keeps later processes from trying again (``python -m spacy_elmo kernels --build``
retries). ``SPACY_ELMO_COMPILED=0`` turns it off.

Loading a library runs its code, so nothing is loaded that someone else could have put there: the
build writes a record beside the library (its SHA-256, the sources' SHA-256, the compiler, torch)
and moves both into place by rename, and before loading, the folder, its parents and the files
must belong to this user (or root) and be writable by no one else, and the library must match the
record. Anything else is refused with a warning and the Python loop runs. The record sits in the
same folder, so the hash catches a damaged or replaced library; the permissions are what keep
another local user from replacing both.
"""
import hashlib
import json
import os
import platform
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence

import torch

from ..files import cache_dir, file_sha256

ENV = "SPACY_ELMO_COMPILED"  # "0": never build or load the compiled step
DIR_ENV = "SPACY_ELMO_KERNELS"  # where built kernels go (default: the cache's kernels/)
CSRC = Path(__file__).parent / "csrc"
TORCH_ROOT = Path(torch.__file__).resolve().parent
SOURCES = ("cell_math.cpp", "bf16_rows.cpp", "int8_rows.cpp", "lstmp_steps.cpp")
# the elementwise loop needs no torch headers; these two flags let the compiler vectorize it (no
# errno to set, no floating-point exceptions to keep) and change no result
PLAIN_SOURCES = {"cell_math.cpp": ["-fno-math-errno", "-fno-trapping-math"], "bf16_rows.cpp": [],
                 # no fused multiply-adds: the int8 products' scaling must round as int8_rows.py's does
                 "int8_rows.cpp": ["-ffp-contract=off"]}
_LOCK = threading.Lock()
_STATE: Dict[str, object] = {"library": None, "tried": False, "error": None}


class KernelBuildError(RuntimeError):
    """The kernel library could not be built or loaded here."""


def kernel_dir() -> Path:
    """Where built kernels are kept: ``$SPACY_ELMO_KERNELS``, else ``kernels/`` in the cache folder
    (``cache_dir()``, where downloads go too)."""
    if os.environ.get(DIR_ENV):
        return Path(os.environ[DIR_ENV]).expanduser()
    return cache_dir() / "kernels"


def enabled() -> bool:
    """Whether the compiled step may be used (not switched off by the environment)."""
    return os.environ.get(ENV, "1") != "0"


def library(build: bool = True) -> Optional[Any]:
    """``torch.ops.spacy_elmo``, the kernels' namespace (``lstmp_steps``, ``bf16_rows``, ``int8_rows``),
    once the library is loaded (and built if missing and ``build``); None where it is switched off or
    cannot be had (then one warning says why, once per process)."""
    if not enabled():
        return None
    if _STATE["library"] is not None or _STATE["tried"]:
        return _STATE["library"]
    with _LOCK:
        if not _STATE["tried"]:
            try:
                load(build=build)
                _STATE["library"] = torch.ops.spacy_elmo
            except KernelBuildError as error:
                _STATE["error"] = str(error)
                warnings.warn(f"the compiled LSTM step is not available ({error}); running the Python step",
                              RuntimeWarning, stacklevel=4)
            _STATE["tried"] = True
    return _STATE["library"]


def load(build: bool = True, force: bool = False) -> None:
    """Load the library for this machine, building it first if it is missing (or ``force``).

    A process loads one such library: after the first, a new build is used by new processes.
    A library is loaded only once ``refusal`` finds nothing wrong with it; one without a build
    record (from a spacy-elmo that wrote none) is built again where ``build`` allows.
    Raises KernelBuildError where it cannot be built, or must not be loaded.
    """
    if sys.platform not in ("linux", "darwin"):
        raise KernelBuildError(f"not built on {sys.platform}")
    path = library_path()
    failed = path.with_suffix(".failed")
    # from a spacy-elmo that wrote no record; replaced only in a folder no one else can write to
    unrecorded = path.exists() and not record_path(path).exists() and exposure(path.parent, [path]) is None
    if force or not path.exists() or (unrecorded and build):
        if failed.exists() and not force:
            raise KernelBuildError(f"an earlier build failed, see {failed}; `python -m spacy_elmo kernels --build` retries")
        if not build:
            raise KernelBuildError(f"not built yet: {path}")
        _build(path, failed, force=force or unrecorded)
    if not _loaded():
        problem = refusal(path)
        if problem is not None:
            raise KernelBuildError(f"refused {path}: {problem}")
        try:
            torch.ops.load_library(str(path))
        except (OSError, RuntimeError) as error:
            raise KernelBuildError(f"could not load {path}: {error}; {_REBUILD}") from error


_REBUILD = "`python -m spacy_elmo kernels --build --force` builds it afresh"


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


def record_path(library: Path) -> Path:
    """The build record beside ``library``: what it was built from, and its SHA-256."""
    return library.with_suffix(".json")


def refusal(library: Path) -> Optional[str]:
    """Why ``library`` must not be loaded, or None where it may.

    library (Path): a built library.
    RETURNS (Optional[str]): the reason, naming the path at fault.
    """
    unsafe = exposure(library.parent, [library, record_path(library)])
    if unsafe is not None:
        return unsafe  # a rebuild would not help: whoever may write there could replace it again
    mismatch = _mismatch(library)
    return None if mismatch is None else f"{mismatch}; {_REBUILD}"


def exposure(folder: Path, files: Sequence[Path] = ()) -> Optional[str]:
    """Why someone other than this user (or root) could replace what is loaded from ``folder``,
    or None. Like ssh's checks of ``~/.ssh``: ``folder`` and ``files`` must belong to this user or
    root and be writable by no one else; each folder above must belong to them too and, if others
    may write to it, be sticky (as ``/tmp``), so that no one else can rename what it holds.

    folder (Path): the kernel folder.
    files (Sequence[Path]): files in it to check too; those that do not exist are left out.
    RETURNS (Optional[str]): the reason, with the path, its mode and what to do.
    """
    if not hasattr(os, "getuid"):
        return f"file ownership is not checked on {sys.platform}"
    folder = folder.resolve()
    trusted = (os.getuid(), 0)
    for path in [*(f for f in files if f.exists()), folder, *folder.parents]:
        info = path.stat()
        mode = stat.S_IMODE(info.st_mode)
        shared = path in folder.parents and info.st_mode & stat.S_ISVTX
        if info.st_uid not in trusted:
            return (f"{path} belongs to another user (uid {info.st_uid}); set ${DIR_ENV} to a folder of "
                    "your own and run `python -m spacy_elmo kernels --build`")
        if mode & 0o022 and not shared:
            return (f"{path} may be written by others (mode {mode:o}); `chmod go-w {path}`, or set "
                    f"${DIR_ENV} to a private folder and run `python -m spacy_elmo kernels --build`")
    return None


def _mismatch(library: Path) -> Optional[str]:
    """Why ``library`` is not the one its build record describes (or the sources installed now
    are not the ones it was built from), or None."""
    record = record_path(library)
    if not record.exists():
        return f"there is no build record {record.name} beside it, so it was not built by this spacy-elmo"
    try:
        built = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        return f"its build record {record} cannot be read ({error})"
    if not isinstance(built, dict):
        return f"its build record {record} is not a JSON object"
    if built.get("sources") != _source_hashes():
        return f"its build record {record} names other sources than the installed ones"
    if built.get("torch") != torch.__version__:
        return f"it was built for torch {built.get('torch')}, not {torch.__version__}"
    digest = file_sha256(library)
    if built.get("library_sha256") != digest:
        return f"its SHA-256 {digest[:16]}... is not the {str(built.get('library_sha256'))[:16]}... recorded in {record} when it was built"
    return None


def _source_hashes() -> Dict[str, str]:
    return {name: file_sha256(CSRC / name) for name in SOURCES}


def _build(path: Path, failed: Path, *, force: bool = False) -> None:
    """Compile and link into a temporary folder beside ``path``, then move the build record and the
    library into place (in that order, each by one rename: a process that sees the library sees
    its record). One process builds at a time; one that waited finds the library built and stops
    there unless ``force``. Every failure (no compiler, a compiler error, a folder that cannot be
    written or that others may write to) is a KernelBuildError, recorded in ``failed`` where that
    can be written."""
    compiler = _compiler()
    if compiler is None or sys.platform not in ("linux", "darwin"):
        raise KernelBuildError("no C++ compiler found (set $CXX)" if compiler is None else f"not built on {sys.platform}")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        problem = exposure(path.parent)
        if problem is not None:
            raise KernelBuildError(f"not building into {path.parent}: {problem}")
        with _build_lock(path), tempfile.TemporaryDirectory(dir=path.parent, prefix=".build-") as work:
            if path.exists() and record_path(path).exists() and not force:
                return
            print(f"spacy_elmo: compiling the LSTM step for this CPU into {path.parent}: once per machine, "
                  "about 15 s on two cores (`python -m spacy_elmo kernels --build` does it ahead, "
                  f"{ENV}=0 switches it off)", file=sys.stderr, flush=True)
            began = time.monotonic()
            built = Path(work) / path.name
            for command in build_commands(compiler, Path(work), built):
                done = subprocess.run(command, capture_output=True, text=True, timeout=600)
                if done.returncode != 0:
                    _record(failed, " ".join(command) + "\n" + done.stdout + done.stderr)
                    raise KernelBuildError(f"{Path(command[0]).name} failed, see {failed}")
            built.chmod(0o755)
            record = Path(work) / record_path(path).name
            record.write_text(json.dumps(_build_record(built, compiler), indent=2), encoding="utf-8")
            record.chmod(0o644)  # a umask of 002 would leave both group-writable, and so refused
            os.replace(record, record_path(path))
            os.replace(built, path)
            print(f"spacy_elmo: compiled {path.name} in {time.monotonic() - began:.1f} s", file=sys.stderr, flush=True)
    except (OSError, subprocess.TimeoutExpired) as error:
        _record(failed, f"{error}\n")
        raise KernelBuildError(f"could not build into {path.parent}: {error}") from error
    failed.unlink(missing_ok=True)


def _build_record(library: Path, compiler: str) -> Dict[str, object]:
    return {
        "library_sha256": file_sha256(library),
        "sources": _source_hashes(),
        "compiler": compiler,
        "compiler_version": (_compiler_version().splitlines() or [""])[0],
        "torch": torch.__version__,
        "built": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


@contextmanager
def _build_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock for building ``path`` (processes that start together, such as the
    ranks of a distributed run, compile it once), saying so when another process holds it."""
    import fcntl  # POSIX only, as the compiled step is; imported here so the module loads anywhere

    with open(path.with_suffix(".lock"), "a", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"spacy_elmo: waiting for another process compiling the LSTM step into {path.parent}",
                  file=sys.stderr, flush=True)
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _record(failed: Path, text: str) -> None:
    try:
        failed.write_text(text, encoding="utf-8")
    except OSError:
        pass  # an unwritable folder: the warning still says why


def build_commands(compiler: str, work: Path, library: Path) -> List[List[str]]:
    """The compiler calls that build ``library``: one per source, then the link."""
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    common = ["-O3", "-march=native", "-fPIC", "-std=c++20", "-w", f"-D_GLIBCXX_USE_CXX11_ABI={abi}"]
    includes = [f"-I{p}" for p in torch_include_paths()]
    commands, objects = [], []
    for name in SOURCES:
        obj = work / (name + ".o")
        extra = PLAIN_SOURCES.get(name, includes)
        commands.append([compiler, *common, *extra, "-c", str(CSRC / name), "-o", str(obj)])
        objects.append(str(obj))
    libs = [str(TORCH_ROOT / "lib")]
    link = [compiler, "-shared", *objects, "-o", str(library), *(f"-L{p}" for p in libs)]
    link += [*(f"-Wl,-rpath,{p}" for p in libs), "-lc10", "-ltorch_cpu"]
    commands.append(link + ["-lm"])
    return commands


def torch_include_paths() -> List[str]:
    """The installed torch's C++ headers, as ``torch.utils.cpp_extension.include_paths()`` lists them
    for the CPU. Not taken from there: importing it imports setuptools, whose distutils shim raises
    an AssertionError in a process that imported the standard library's distutils first."""
    include = TORCH_ROOT / "include"
    return [str(include), str(include / "torch" / "csrc" / "api" / "include")]


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
    verified (``refused`` says why not), loaded, switched off, or failed (with the reason)."""
    path = library_path()
    failed = path.with_suffix(".failed")
    problem = refusal(path) if path.exists() else None
    return {
        "library": str(path),
        "record": str(record_path(path)),
        "built": path.exists(),
        "verified": path.exists() and problem is None,
        "refused": problem,
        "loaded": _loaded(),
        "enabled": enabled(),
        "failed": failed.read_text(encoding="utf-8", errors="replace")[-2000:] if failed.exists() else None,
        "compiler": _compiler(),
    }
