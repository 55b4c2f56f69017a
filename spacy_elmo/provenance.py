"""Where a recorded number came from: the command, the code's commit, the machine and the date.

Every results file the package's commands and scripts write carries this record, so a number in the
documentation can be traced to the state of the code and the machine that produced it.
"""
import datetime
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Union

import torch

CHECKOUT = Path(__file__).resolve().parent.parent
# what runs write, not what they run: a changed results file does not make the code dirty
RESULTS_EXCLUDED = (":(exclude)results", ":(exclude)bench/results")


def provenance(command: Optional[str] = None) -> Dict[str, Any]:
    """The record that goes into a results file.

    command (Optional[str]): the command line that wrote the file (default: this process's).
    RETURNS (Dict[str, Any]): command, commit and dirty (None outside a git checkout; dirty: tracked
        files other than results differed from the commit: a run that rewrites results/ or
        bench/results/ leaves the code it ran as committed), cpu, cpu_flags (``FLAGS_THAT_MATTER`` present),
        cpu_capability (torch's kernel level), cpu_count, torch_threads, python, torch, spacy_elmo, date (UTC).
    """
    from . import __version__

    commit = _git("rev-parse", "HEAD")
    changed = _git("status", "--porcelain", "--untracked-files=no", "--", ".", *RESULTS_EXCLUDED)
    return {
        "command": command or command_line(),
        "commit": commit,
        "dirty": None if changed is None else bool(changed),
        "cpu": cpu_model(),
        "cpu_flags": cpu_flags(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "spacy_elmo": __version__,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def inference_path() -> Dict[str, Any]:
    """Which timestep loop this process's default (not ``exact``) inference ran: call it after the run.

    RETURNS (Dict[str, Any]): compiled_loop ("loaded": the C++ loop of ``spacy_elmo.fast.compiled``
        ran; "built": built here but not loaded by this process, so the Python lockstep loop ran;
        "switched off": ``SPACY_ELMO_COMPILED=0``; "refused": the file failed its check;
        "failed": it could not be built; "not built"),
        and compiled_library (the library's file name, which hashes its sources, torch, the
        compiler and the CPU).
    """
    from .fast import compiled

    state = compiled.status()
    if not state["enabled"]:
        loop = "switched off"
    elif state["loaded"]:
        loop = "loaded"
    elif state.get("refused"):
        loop = "refused"
    elif state["failed"]:
        loop = "failed"
    else:
        loop = "built" if state["built"] else "not built"
    return {"compiled_loop": loop, "compiled_library": Path(str(state["library"])).name}


def model_files(directory: Union[str, Path]) -> Dict[str, Any]:
    """The model a run used: its directory and the SHA-256 of every file under it.

    directory (Union[str, Path]): the model's directory (a biLM or a pipeline).
    RETURNS (Dict[str, Any]): path (relative to the current directory) and sha256 ({file: hex digest}).
    """
    from .io.download import file_sha256

    directory = Path(directory)
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    return {
        "path": os.path.relpath(directory),
        "sha256": {p.relative_to(directory).as_posix(): file_sha256(p) for p in files},
    }


def command_line(argv: Optional[Sequence[str]] = None) -> str:
    """This process's command as a reader would type it: ``python -m PACKAGE`` for a package's
    ``__main__.py``, paths inside the current directory made relative."""
    args = list(sys.argv if argv is None else argv)
    program = Path(args[0]).resolve() if args else Path("python")
    if program.name == "__main__.py":
        first = ["-m", program.parent.name]
    else:
        first = [_relative(str(program))]
    return shlex.join(["python", *first, *(_relative(a) for a in args[1:])])


def cpu_model() -> str:
    """RETURNS (str): the CPU's model name (Linux /proc/cpuinfo), else what platform knows."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


# the flags that decide which kernels run: vector width, bf16 and int8 arithmetic, AMX tiles
FLAGS_THAT_MATTER = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "avx512_fp16", "amx_bf16", "amx_int8", "amx_tile")


def cpu_flags() -> list:
    """RETURNS (list): which of ``FLAGS_THAT_MATTER`` the CPU has (Linux /proc/cpuinfo; empty elsewhere)."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.is_file():
        return []
    line = next((l for l in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines() if l.startswith("flags")), "")
    present = set(line.split(":", 1)[-1].split())
    return [flag for flag in FLAGS_THAT_MATTER if flag in present]


def _relative(arg: str) -> str:
    path = Path(arg)
    if not path.is_absolute():
        return arg
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return arg


def _git(*args: str) -> Optional[str]:
    if not (CHECKOUT / ".git").exists():
        return None
    found = subprocess.run(["git", "-C", str(CHECKOUT), *args], capture_output=True, text=True, check=False)
    return found.stdout.strip() if found.returncode == 0 else None
