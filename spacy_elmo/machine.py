"""The facts of this machine and process that a results record names: the CPU's model and the
flags that decide which kernels run, and which timestep loop inference ran.
"""
import platform
from pathlib import Path
from typing import Any, Dict

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
