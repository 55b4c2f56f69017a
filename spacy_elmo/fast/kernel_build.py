"""Compiling the kernel library's variants (``kernel_variants.py``) with the system's C++ compiler.

A library is the kernels' arithmetic (``csrc/cell_math.cpp``, ``bf16_rows.cpp``, ``int8_rows.cpp``
and ``variant.cpp``, which names the variant and the ops' namespace), compiled with the variant's
flags, linked with the torch glue (``csrc/lstmp_steps.cpp``: the ops' registration and the timestep
loop's calls of torch's products, no arithmetic of its own). The glue takes most of a build's time
(about 18 s of 22 on two cores) and is the same code for every variant, so it is compiled once per
build, with the most portable variant's flags, and linked into every variant that build makes.
Built into a private temporary folder beside the libraries, then moved into place with the build
record (what ``kernel_library.refusal`` checks before loading): the caller, ``kernel_library``,
decides which variants to build and checks the folder first. ``build_prebuilt`` (``python -m
spacy_elmo.fast.kernel_build --prebuilt FOLDER``, which setup.py runs when it makes the platform
wheel) builds every variant the same way into the wheel's ``prebuilt/`` folder.
"""
import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import torch

from ..files import file_sha256
from .kernel_variants import Variant, variants

CSRC = Path(__file__).parent / "csrc"
TORCH_ROOT = Path(torch.__file__).resolve().parent
GLUE = "lstmp_steps.cpp"
# the arithmetic needs no torch headers; its symbols stay inside the library (hidden), so that
# variants loaded side by side each call their own. cell_math's two flags let the compiler
# vectorize its loop (no errno to set, no floating-point exceptions to keep) and change no result;
# int8_rows takes no fused multiply-adds: its scaling must round as int8_rows.py's does.
PLAIN_SOURCES = {"variant.cpp": [], "cell_math.cpp": ["-fno-math-errno", "-fno-trapping-math"], "bf16_rows.cpp": [],
                 "int8_rows.cpp": ["-ffp-contract=off"]}
SOURCES = (*PLAIN_SOURCES, GLUE)


def library_name(variant: Variant) -> str:
    """The file name of ``variant``'s library: it hashes the sources, the torch version, the
    compiler, the variant's flags (and, for ``-march=native``, the CPU), so that a change of any
    of them builds a new one."""
    key = hashlib.sha256()
    for name in SOURCES:
        key.update((CSRC / name).read_bytes())
    flags = [*variant.flags, *(f for extra in PLAIN_SOURCES.values() for f in extra), *glue_flags(), *openmp_flags()]
    parts = [torch.__version__, sys.platform, platform.machine(), compiler_version(), variant.name, " ".join(flags)]
    if "-march=native" in variant.flags:
        parts.append(_cpu_identity())
    for part in parts:
        key.update(part.encode("utf-8", "replace"))
    return f"kernels-{variant.name}-{key.hexdigest()[:16]}.so"


def glue_flags() -> Tuple[str, ...]:
    """The torch glue's target flags: the most portable variant's, so any variant may link it."""
    return variants()[0].flags


def openmp_flags() -> Tuple[str, ...]:
    """``("-fopenmp",)`` where the glue's ``at::parallel_for`` may split a timestep's rows between
    torch's threads: on Linux, with GCC, in a process whose torch runs GNU's OpenMP (``libgomp``,
    whose ``libgomp.so.1`` the library then shares with torch: one runtime, one pool of threads).
    Elsewhere ``()``: the pragma is then left out and the rows run on the calling thread (a second
    OpenMP runtime beside torch's would contend with it for the cores)."""
    if sys.platform != "linux" or not torch.backends.openmp.is_available():
        return ()
    if "Free Software Foundation" not in compiler_version():
        return ()
    try:
        maps = Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ()
    return ("-fopenmp",) if "libgomp" in maps else ()


def build(targets: Dict[Variant, Path], *, force: bool = False) -> Dict[str, str]:
    """Build the libraries ``targets`` names (those missing or without a record, all with ``force``)
    in one temporary folder beside them: the glue once, then each variant's arithmetic and link.
    Each library and its record are moved into place by one rename each, the record first (a
    process that sees the library sees its record). One process builds into a folder at a time.

    targets (Dict[Variant, Path]): where each variant's library goes (one folder).
    RETURNS (Dict[str, str]): the variants that failed, with the failed command and its output
        (empty when all were built). Raises OSError where the folder cannot be written.
    """
    folder = next(iter(targets.values())).parent
    compiler_path = compiler()
    with _build_lock(folder), tempfile.TemporaryDirectory(dir=folder, prefix=".build-") as work:
        todo = {v: p for v, p in targets.items() if force or not (p.exists() and p.with_suffix(".json").exists())}
        if not todo:
            return {}
        names = ", ".join(v.name for v in todo)
        print(f"spacy_elmo: compiling the LSTM step for this CPU ({names}) into {folder}: once per machine, "
              "about 20 s on two cores (`python -m spacy_elmo kernels --build` does it ahead, "
              "SPACY_ELMO_COMPILED=0 switches it off)", file=sys.stderr, flush=True)
        began = time.monotonic()
        glue = Path(work) / (GLUE + ".o")
        # the glue compiles beside the arithmetic of every variant: on two cores a build of several
        # variants takes about as long as the glue alone
        compiling = subprocess.Popen(compile_command(compiler_path, GLUE, glue_flags(), glue), stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        try:
            commands = {v: build_commands(compiler_path, Path(work) / v.name, Path(work) / p.name, v, glue)
                        for v, p in todo.items()}
            errors = {v.name: failed for v, failed in ((v, _run(c[:-1])) for v, c in commands.items()) if failed}
            output = compiling.communicate(timeout=600)[0]
        finally:
            if compiling.poll() is None:
                compiling.kill()
                compiling.wait()
        if compiling.returncode != 0:
            return {v.name: " ".join(compiling.args) + "\n" + output for v in todo}
        for variant, path in todo.items():
            failed = errors.get(variant.name) or _run(commands[variant][-1:])
            if failed:
                errors[variant.name] = failed
                continue
            built = Path(work) / path.name
            built.chmod(0o755)
            record = Path(work) / path.with_suffix(".json").name
            record.write_text(json.dumps(build_record(built, compiler_path, variant), indent=2), encoding="utf-8")
            record.chmod(0o644)  # a umask of 002 would leave both group-writable, and so refused
            os.replace(record, path.with_suffix(".json"))
            os.replace(built, path)
            print(f"spacy_elmo: compiled {path.name} in {time.monotonic() - began:.1f} s", file=sys.stderr, flush=True)
        return errors


def build_prebuilt(folder: Path) -> Dict[str, Path]:
    """Build every variant of this machine but ``-march=native`` (a wheel runs on other CPUs) into
    ``folder`` with its build record, as the kernel folder holds them: the platform wheel's
    ``prebuilt/``, which ``kernel_library`` loads from before it compiles anything.

    RETURNS (Dict[str, Path]): each variant's library. Raises RuntimeError naming what failed.
    """
    if compiler() is None:
        raise RuntimeError("no C++ compiler found (set $CXX): the platform wheel needs one to prebuild its kernels")
    folder.mkdir(parents=True, exist_ok=True)
    targets = {v: folder / library_name(v) for v in variants() if "-march=native" not in v.flags}
    errors = build(targets, force=True)
    (folder / "build.lock").unlink(missing_ok=True)  # the build's own lock, nothing to ship
    if errors:
        raise RuntimeError("prebuilding the kernels failed: " + "; ".join(f"{n}: {e[:2000]}" for n, e in errors.items()))
    return {v.name: path for v, path in targets.items()}


def _run(commands: List[List[str]]) -> Optional[str]:
    """Run ``commands`` in turn; RETURNS (Optional[str]) the first failing one with its output, or None."""
    for command in commands:
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            return " ".join(command) + "\n" + done.stdout + done.stderr
    return None


def build_record(library: Path, compiler_path: str, variant: Variant) -> Dict[str, object]:
    """What a library was built from, and its SHA-256 (``kernel_library.refusal`` checks it)."""
    return {
        "library_sha256": file_sha256(library),
        "variant": variant.name,
        "flags": list(variant.flags),
        "sources": source_hashes(),
        "compiler": compiler_path,
        "compiler_version": (compiler_version().splitlines() or [""])[0],
        "torch": torch.__version__,
        "built": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def source_hashes() -> Dict[str, str]:
    """RETURNS (Dict[str, str]): the SHA-256 of each source, by name."""
    return {name: file_sha256(CSRC / name) for name in SOURCES}


@contextmanager
def _build_lock(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock for building into ``folder`` (processes that start together, such as
    the ranks of a distributed run, compile once), saying so when another process holds it."""
    import fcntl  # POSIX only, as the compiled step is; imported here so the module loads anywhere

    with open(folder / "build.lock", "a", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"spacy_elmo: waiting for another process compiling the LSTM step into {folder}",
                  file=sys.stderr, flush=True)
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _common_flags() -> List[str]:
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    return ["-O3", "-fPIC", "-std=c++20", "-w", f"-D_GLIBCXX_USE_CXX11_ABI={abi}"]


def compile_command(compiler_path: str, source: str, flags: Sequence[str], obj: Path, variant: str = "") -> List[str]:
    """The compiler call for one source: the glue with torch's headers, the arithmetic with its own
    flags, hidden symbols and the variant's name."""
    if source == GLUE:
        extra = [f"-I{p}" for p in torch_include_paths()] + list(openmp_flags())
    else:
        extra = [*PLAIN_SOURCES[source], "-fvisibility=hidden", f"-DSPACY_ELMO_VARIANT={variant}"]
    return [compiler_path, *_common_flags(), *flags, *extra, "-c", str(CSRC / source), "-o", str(obj)]


def build_commands(compiler_path: str, work: Path, library: Path, variant: Variant, glue: Path) -> List[List[str]]:
    """The compiler calls that build ``variant``'s ``library`` in ``work``: one per source of its
    arithmetic, then the link with the ``glue`` object."""
    work.mkdir(exist_ok=True)
    commands, objects = [], []
    for name in PLAIN_SOURCES:
        obj = work / (name + ".o")
        commands.append(compile_command(compiler_path, name, variant.flags, obj, variant.name))
        objects.append(str(obj))
    libs = [str(TORCH_ROOT / "lib")]
    link = [compiler_path, "-shared", *openmp_flags(), *objects, str(glue), "-o", str(library), *(f"-L{p}" for p in libs)]
    link += [*(f"-Wl,-rpath,{p}" for p in libs), "-lc10", "-ltorch_cpu"]
    commands.append(link + ["-lm"])
    return commands


def torch_include_paths() -> List[str]:
    """The installed torch's C++ headers, as ``torch.utils.cpp_extension.include_paths()`` lists them
    for the CPU. Not taken from there: importing it imports setuptools, whose distutils shim raises
    an AssertionError in a process that imported the standard library's distutils first."""
    include = TORCH_ROOT / "include"
    return [str(include), str(include / "torch" / "csrc" / "api" / "include")]


def compiler() -> Optional[str]:
    """RETURNS (Optional[str]): the C++ compiler's path (``$CXX``, else ``c++``, ``g++``, ``clang++``), or None."""
    for name in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def compiler_version() -> str:
    """RETURNS (str): what the compiler's ``--version`` says ("none" without one)."""
    compiler_path = compiler()
    if compiler_path is None:
        return "none"
    try:
        return subprocess.run([compiler_path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def _cpu_identity() -> str:
    """The CPU's model name and flags (for a variant built with -march=native)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            lines = [line for line in cpuinfo if line.startswith(("model name", "flags", "Features"))]
        return "".join(sorted(set(lines)))
    except OSError:
        return platform.processor()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Prebuild every kernel variant into a folder (the platform wheel's).")
    parser.add_argument("--prebuilt", type=Path, required=True, help="the folder: the wheel's spacy_elmo/fast/prebuilt")
    for name, path in build_prebuilt(parser.parse_args().prebuilt).items():
        print(f"{name}: {path}")
