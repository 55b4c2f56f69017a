"""The kernel library (``csrc/``): compiled for this CPU's instruction set on first use, cached,
verified, loaded.

One shared library holds every C++ kernel: the lockstep pair's timestep loop (``compiled.py``), the
bf16 products of a few rows (``bf16_rows.py``) and the int8 products of rows quantized on their own
(``int8_rows.py``). Each of them asks ``library()`` for its ops; none of them builds or loads it.

It is built in variants, one per instruction set (``kernel_variants.py``: portable, avx2, avx512,
avx512_vnni, avx512_bf16 on x86-64), each its own library whose ops register in their own namespace
(``torch.ops.spacy_elmo_avx2``), so that variants load side by side: the tests compare every
variant the CPU runs with the reference in one process, and the benchmark times them interleaved.
A process runs the variant ``kernel_variants.chosen`` picks (the fastest the CPU runs, or
``$SPACY_ELMO_KERNEL_VARIANT``; read at the first use), except inside ``using(name)``.

Each is built with the system's C++ compiler (``$CXX``, else ``c++``/``g++``) against the installed
torch (``kernel_build.py``) into ``$SPACY_ELMO_CACHE/kernels`` (default ``~/.cache/spacy_elmo/kernels``;
``$SPACY_ELMO_KERNELS`` sets the folder itself) under a name that hashes the sources, the torch
version, the compiler and the variant: once per machine (about 20 s on two cores). Where it cannot
be built (no compiler, no torch headers, not Linux or macOS) the Python loop runs instead, with one
warning, and a marker file keeps later processes from trying again (``python -m spacy_elmo kernels
--build`` retries). ``SPACY_ELMO_COMPILED=0`` turns it off.

The platform wheel carries every variant prebuilt (``prebuilt/`` beside this file, built by
``kernel_build.build_prebuilt`` when the wheel is made, with their build records): a variant is
taken from there first, under the same checks as a library built here, and nothing is compiled. A
prebuilt library built for another torch than the one installed is not loaded: one warning names
both versions, and the variant is compiled into the kernel folder as from the source distribution
(or, without a compiler, the Python loop runs).

Loading a library runs its code, so nothing is loaded that someone else could have put there: the
build writes a record beside the library (its SHA-256, the sources' SHA-256, the variant, the
compiler, torch) and moves both into place by rename, and before loading, the folder, its parents
and the files must belong to this user (or root) and be writable by no one else, and the library
must match the record. Anything else is refused with a warning and the Python loop runs. The record
sits in the same folder, so the hash catches a damaged or replaced library; the permissions are what
keep another local user from replacing both.
"""
import json
import os
import sys
import threading
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Sequence

import torch

from ..files import cache_dir, file_sha256
from . import kernel_build, kernel_variants
from .kernel_build import compiler
from .kernel_trust import DIR_ENV, exposure, prebuilt_exposure
from .kernel_variants import Variant, VariantError

ENV = "SPACY_ELMO_COMPILED"  # "0": never build or load the compiled step
PREBUILT_DIR = Path(__file__).resolve().parent / "prebuilt"  # the platform wheel's variants
# the Python code that loads a prebuilt library: whoever may change it runs code here already
CODE = (Path(__file__).resolve(), Path(__file__).resolve().parent)
_LOCK = threading.Lock()
# per variant name ("" for the one chosen for the process): its ops, or why there are none
_STATE: Dict[str, Any] = {"ops": {}, "errors": {}, "prebuilt_warned": set()}
_PINNED = threading.local()
_REBUILD = "`python -m spacy_elmo kernels --build --force` builds it afresh"


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
    """The kernels' ops (``lstmp_steps``, ``bf16_rows``, ``int8_rows``, ...) of the variant in use:
    the one ``using`` pinned in this thread, else the one chosen for this process; loaded (and built
    if missing and ``build``) at the first call. None where it is switched off or cannot be had
    (then one warning says why, once per process and variant)."""
    if not enabled():
        return None
    key = getattr(_PINNED, "name", "")
    if key in _STATE["ops"]:
        return _STATE["ops"][key]
    with _LOCK:
        if key not in _STATE["ops"]:
            ops = None
            try:
                ops = load(kernel_variants.by_name(key) if key else chosen_variant(), build=build)
            except KernelBuildError as error:
                _STATE["errors"][key] = str(error)
                warnings.warn(f"the compiled LSTM step is not available ({error}); running the Python step",
                              RuntimeWarning, stacklevel=4)
            _STATE["ops"][key] = ops
    return _STATE["ops"][key]


@contextmanager
def using(name: str) -> Iterator[None]:
    """Within this block (this thread), ``library()`` gives the ops of the variant called ``name``,
    not the chosen one: how the tests and the benchmark run each variant in one process. Raises
    VariantError where this CPU cannot run it (its code would stop the process)."""
    variant = kernel_variants.by_name(name)
    lacking = kernel_variants.missing(variant)
    if lacking:
        raise VariantError(f"this CPU cannot run the {name} kernels (it lacks {', '.join(lacking)})")
    before = getattr(_PINNED, "name", "")
    _PINNED.name = name
    try:
        yield
    finally:
        _PINNED.name = before


def chosen_variant() -> Variant:
    """``kernel_variants.chosen()``, its refusal (a name that is no variant, or one this CPU cannot
    run) as a KernelBuildError."""
    try:
        return kernel_variants.chosen()
    except VariantError as error:
        raise KernelBuildError(str(error)) from None


def variant_record() -> str:
    """RETURNS (str): the kernel variant this process runs or would run, as a run record names it
    (``spacy_elmo.records.machine``): its name, "off" where the compiled kernels are switched off,
    or why the variant asked for is refused."""
    if not enabled():
        return f"off ({ENV}=0)"
    try:
        return chosen_variant().name
    except KernelBuildError as error:
        return f"refused: {error}"


def load(variant: Optional[Variant] = None, build: bool = True, force: bool = False) -> Any:
    """Load ``variant``'s library (default: the chosen one), building it first if it is missing (or
    ``force``). A process loads one library per variant: after the first, a new build is used by new
    processes. A library is loaded only once ``refusal`` finds nothing wrong with it; one without a
    build record is built again where ``build`` allows.

    RETURNS (Any): its ops, ``torch.ops.spacy_elmo_VARIANT``. Raises KernelBuildError where it
    cannot be built, or must not be loaded.
    """
    if sys.platform not in ("linux", "darwin"):
        raise KernelBuildError(f"not built on {sys.platform}")
    variant = variant or chosen_variant()
    if not force and _prebuilt_usable(variant):
        return _load_verified(variant, prebuilt_path(variant))
    path = library_path(variant)
    failed = path.with_suffix(".failed")
    # from a spacy-elmo that wrote no record; replaced only in a folder no one else can write to
    unrecorded = path.exists() and not record_path(path).exists() and exposure(path.parent, [path]) is None
    if force or not path.exists() or (unrecorded and build):
        if failed.exists() and not force:
            raise KernelBuildError(f"an earlier build failed, see {failed}; `python -m spacy_elmo kernels --build` retries")
        if not build:
            raise KernelBuildError(f"not built yet: {path}")
        _build([variant], force=force or unrecorded)
    return _load_verified(variant, path)


def _load_verified(variant: Variant, path: Path) -> Any:
    """Load the library at ``path`` unless ``variant``'s is loaded already, once ``refusal`` finds
    nothing wrong with it. RETURNS (Any): its ops."""
    if not _loaded(variant):
        problem = refusal(path)
        if problem is not None:
            raise KernelBuildError(f"refused {path}: {problem}")
        try:
            torch.ops.load_library(str(path))
        except (OSError, RuntimeError) as error:
            raise KernelBuildError(f"could not load {path}: {error}; {_REBUILD}") from error
    return getattr(torch.ops, variant.namespace)


def prebuilt_path(variant: Variant) -> Optional[Path]:
    """RETURNS (Optional[Path]): ``variant``'s library as the platform wheel carries it, or None
    (a source install has no ``prebuilt/`` folder)."""
    found = sorted(PREBUILT_DIR.glob(f"kernels-{variant.name}-*.so"))
    return found[0] if len(found) == 1 else None


def prebuilt_refusal(variant: Variant) -> Optional[str]:
    """RETURNS (Optional[str]): why ``variant``'s prebuilt library must not be loaded (built for
    another torch, damaged, exposed to other users), or None where it may (or there is none)."""
    path = prebuilt_path(variant)
    return None if path is None else refusal(path)


def _prebuilt_usable(variant: Variant) -> bool:
    """Whether ``variant``'s prebuilt library may be loaded; where one is there but refused, one
    warning per process says why (another torch: both versions) before the variant is compiled."""
    path = prebuilt_path(variant)
    if path is None:
        return False
    problem = refusal(path)
    if problem is None:
        return True
    warned = _STATE.setdefault("prebuilt_warned", set())
    if variant.name not in warned:
        warned.add(variant.name)
        # the wheel for this torch helps only where the wheel's torch is what stopped it
        hint = ("" if "built for torch" not in problem
                else " (install the spacy-elmo wheel built for this torch to skip both)")
        warnings.warn(f"not loading the prebuilt {variant.name} kernels: {problem.split('; ')[0]}; compiling them for "
                      f"torch {torch.__version__} where a C++ compiler is found, else running the Python step{hint}",
                      RuntimeWarning, stacklevel=4)
    return False


def _loaded(variant: Variant) -> bool:
    return hasattr(getattr(torch.ops, variant.namespace), "lstmp_steps")


def library_path(variant: Optional[Variant] = None) -> Path:
    """The library's path for these sources, this torch, this compiler and ``variant`` (default:
    the chosen one)."""
    return kernel_dir() / kernel_build.library_name(variant or chosen_variant())


def variant_of(library: Path) -> str:
    """RETURNS (str): the variant a library's file name says it was built for."""
    return library.name.split("-", 1)[-1].rsplit("-", 1)[0]


def record_path(library: Path) -> Path:
    """The build record beside ``library``: what it was built from, and its SHA-256."""
    return library.with_suffix(".json")


def refusal(library: Path) -> Optional[str]:
    """Why ``library`` must not be loaded, or None where it may.

    library (Path): a built library.
    RETURNS (Optional[str]): the reason, naming the path at fault.
    """
    files = [library, record_path(library)]
    prebuilt = library.parent.resolve() == PREBUILT_DIR.resolve()
    unsafe = prebuilt_exposure(library.parent, files, CODE) if prebuilt else exposure(library.parent, files)
    if unsafe is not None:
        return unsafe  # a rebuild would not help: whoever may write there could replace it again
    mismatch = _mismatch(library)
    return None if mismatch is None else f"{mismatch}; {_REBUILD}"


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
    if built.get("sources") != kernel_build.source_hashes():
        return f"its build record {record} names other sources than the installed ones"
    if built.get("variant") != variant_of(library):
        return f"its build record {record} names the variant {built.get('variant')!r}, not {variant_of(library)!r}"
    if built.get("torch") != torch.__version__:
        return f"it was built for torch {built.get('torch')}, not {torch.__version__}"
    digest = file_sha256(library)
    if built.get("library_sha256") != digest:
        return f"its SHA-256 {digest[:16]}... is not the {str(built.get('library_sha256'))[:16]}... recorded in {record} when it was built"
    return None


def _build(variants: Sequence[Variant], *, force: bool = False) -> None:
    """Build ``variants``' libraries (``kernel_build.build``: the glue once for all) into the kernel
    folder, created private, after checking that no one else may write to it. Every failure (no
    compiler, a compiler error, a folder that cannot be written or that others may write to) is a
    KernelBuildError, recorded in each failed variant's ``.failed`` file where that can be written."""
    if compiler() is None or sys.platform not in ("linux", "darwin"):
        raise KernelBuildError("no C++ compiler found (set $CXX)" if compiler() is None else f"not built on {sys.platform}")
    targets = {variant: library_path(variant) for variant in variants}
    folder = kernel_dir()
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        problem = exposure(folder)
        if problem is not None:
            raise KernelBuildError(f"not building into {folder}: {problem}")
        errors = kernel_build.build(targets, force=force)
    except (OSError, kernel_build.subprocess.TimeoutExpired) as error:
        for path in targets.values():
            _record(path.with_suffix(".failed"), f"{error}\n")
        raise KernelBuildError(f"could not build into {folder}: {error}") from error
    for variant, path in targets.items():
        if variant.name in errors:
            _record(path.with_suffix(".failed"), errors[variant.name])
        else:
            path.with_suffix(".failed").unlink(missing_ok=True)
    if errors:
        first = targets[next(v for v in variants if v.name in errors)].with_suffix(".failed")
        compiler_name = Path(errors[next(iter(errors))].split(" ", 1)[0]).name
        raise KernelBuildError(f"{compiler_name} failed for {', '.join(errors)}, see {first}")


def build_variants(variants: Sequence[Variant], *, force: bool = False) -> Dict[str, Optional[str]]:
    """Build the libraries of ``variants`` that are missing or do not verify (all with ``force``),
    in one build: what the tests and the benchmark call for every variant this CPU runs.

    RETURNS (Dict[str, Optional[str]]): each variant's build error, or None where it is built.
    """
    stale = [v for v in variants if force or not library_path(v).exists() or refusal(library_path(v)) is not None]
    error = None
    if stale:
        try:
            _build(stale, force=True)
        except KernelBuildError as failure:
            error = str(failure)
    return {v.name: None if library_path(v).exists() and refusal(library_path(v)) is None else error or "not built"
            for v in variants}


def _record(failed: Path, text: str) -> None:
    try:
        failed.write_text(text, encoding="utf-8")
    except OSError:
        pass  # an unwritable folder: the warning still says why


def status() -> Dict[str, object]:
    """What ``python -m spacy_elmo kernels`` reports: the variant this process runs (``variant``, or
    null with ``refused`` saying why), which variants this CPU runs, and the chosen variant's
    library: its path and whether it is built, verified (``refused`` says why not), loaded,
    switched off, or failed (with the reason); ``prebuilt``: the platform wheel's library of that
    variant (its path, and why it is refused where it is), null for a source install; ``source``:
    where the library the process runs comes from ("prebuilt" or "built here")."""
    chosen_by = f"${kernel_variants.ENV}" if os.environ.get(kernel_variants.ENV, "").strip() else "the CPU's flags"
    state: Dict[str, object] = {"variant": None, "chosen_by": chosen_by, "variants": kernel_variants.described()}
    try:
        variant = chosen_variant()
    except KernelBuildError as error:
        return {**state, "library": None, "record": None, "built": False, "verified": False, "refused": str(error),
                "loaded": False, "enabled": enabled(), "failed": None, "compiler": compiler(), "prebuilt": None,
                "source": None}
    prebuilt = prebuilt_path(variant)
    prebuilt_problem = None if prebuilt is None else refusal(prebuilt)
    if prebuilt is not None and prebuilt_problem is None:
        return {**state, "variant": variant.name, "library": str(prebuilt), "record": str(record_path(prebuilt)),
                "built": True, "verified": True, "refused": None, "loaded": _loaded(variant), "enabled": enabled(),
                "failed": None, "compiler": compiler(), "prebuilt": {"library": str(prebuilt), "refused": None},
                "source": "prebuilt"}
    path = library_path(variant)
    failed = path.with_suffix(".failed")
    problem = refusal(path) if path.exists() else None
    return {
        **state,
        "variant": variant.name,
        "library": str(path),
        "record": str(record_path(path)),
        "built": path.exists(),
        "verified": path.exists() and problem is None,
        "refused": problem,
        "loaded": _loaded(variant),
        "enabled": enabled(),
        "failed": failed.read_text(encoding="utf-8", errors="replace")[-2000:] if failed.exists() else None,
        "compiler": compiler(),
        "prebuilt": None if prebuilt is None else {"library": str(prebuilt), "refused": prebuilt_problem},
        "source": "built here" if path.exists() and problem is None else None,
    }
