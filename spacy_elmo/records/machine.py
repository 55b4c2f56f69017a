"""The facts of this machine that a run record names (``spacy_elmo.provenance``): the CPU's model,
the flags that decide which kernels run, the kernel variant they decided on, and the routes the fp32
products took."""
import platform
from pathlib import Path
from typing import Any, Dict

from ..fast import kernel_library, payoff, prepacked


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


def kernel_variant() -> str:
    """RETURNS (str): the kernel library's variant this process runs (``fast/kernel_variants.py``:
    "portable", "avx2", "avx512", "avx512_vnni", "avx512_bf16"; "off" or "refused: WHY" where none runs)."""
    return kernel_library.variant_record()


def fp32_routes() -> Dict[str, Any]:
    """RETURNS (Dict[str, Any]): whether this torch has oneDNN's linear ops (``onednn_available``) and,
    per model shape optimized in this process so far, what ``fast.payoff.choose_routes`` measured and
    the route it chose in each regime (``chosen``; empty before any)."""
    return {"onednn_available": prepacked.available(), "chosen": payoff.chosen_routes()}
