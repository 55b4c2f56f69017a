"""The facts of this machine that a run record names (``spacy_elmo.provenance``): the CPU's model,
its identity (vendor, family, model) and the folder its benchmark records go to, the flags that decide
which kernels run, the kernel variant they decided on, and the routes the fp32 products took.

The folder of a CPU's benchmark records (``cpu_folder``) is ``VENDOR-fFAMILY-mMODEL``, the numbers
in decimal as ``/proc/cpuinfo`` gives them (``amd-f25-m17``: AMD family 25 model 17, a Zen 4 EPYC;
``amd-f26-...``: Zen 5). The instruction sets alone do not tell CPUs apart: a Zen 4 and a Zen 5 both
report AVX-512 with BF16 and VNNI, and run them at different widths. An ARM CPU is
``arm-IMPLEMENTER-PART`` (``/proc/cpuinfo``'s hexadecimal ids); a CPU that names neither is
``MACHINE-unidentified`` (``platform.machine()``)."""
import platform
import re
from pathlib import Path, PurePath
from typing import Any, Dict, Optional, Union

from ..fast import kernel_library, payoff, prepacked

# /proc/cpuinfo's vendor_id as a folder names it; any other is written lower-case
VENDORS = {"AuthenticAMD": "amd", "GenuineIntel": "intel", "HygonGenuine": "hygon", "CentaurHauls": "centaur"}
# a part of a record's path that stands for this CPU's folder (``record_path``)
CPU_PLACEHOLDER = "CPU"


def _cpuinfo() -> Dict[str, str]:
    """RETURNS (Dict[str, str]): the first processor's fields of Linux's /proc/cpuinfo (empty elsewhere)."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.is_file():
        return {}
    fields: Dict[str, str] = {}
    for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            if fields:  # the first processor's block is enough: the others repeat it
                break
            continue
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_model() -> str:
    """RETURNS (str): the CPU's model name (Linux /proc/cpuinfo), else what platform knows."""
    return _cpuinfo().get("model name") or platform.processor() or platform.machine()


def cpu_identity() -> Dict[str, Any]:
    """RETURNS (Dict[str, Any]): the CPU as /proc/cpuinfo identifies it: ``vendor`` (its vendor_id,
    "AuthenticAMD"), ``family`` and ``model`` (ints) and ``stepping`` on x86-64; ``implementer`` and
    ``part`` (hexadecimal strings) on ARM; ``{}`` where there is no /proc/cpuinfo."""
    fields = _cpuinfo()
    identity: Dict[str, Any] = {}
    if "vendor_id" in fields:
        identity["vendor"] = fields["vendor_id"]
    for key, name in (("cpu family", "family"), ("model", "model"), ("stepping", "stepping")):
        if fields.get(key, "").isdigit():
            identity[name] = int(fields[key])
    for key, name in (("CPU implementer", "implementer"), ("CPU part", "part")):
        if key in fields:
            identity[name] = fields[key].lower()
    return identity


def cpu_folder(identity: Optional[Dict[str, Any]] = None) -> str:
    """The folder a benchmark record of this CPU goes to, below ``results/bench/`` (the module's docstring).

    identity (Optional[Dict[str, Any]]): a ``cpu_identity()`` (default: this machine's).
    RETURNS (str): ``VENDOR-fFAMILY-mMODEL`` ("amd-f25-m17"), ``arm-IMPLEMENTER-PART`` ("arm-0x41-0xd0c"),
        else ``MACHINE-unidentified``.
    """
    identity = cpu_identity() if identity is None else identity
    if isinstance(identity.get("family"), int) and isinstance(identity.get("model"), int):
        vendor = str(identity.get("vendor") or "unknown")
        vendor = VENDORS.get(vendor) or re.sub(r"[^a-z0-9]+", "", vendor.lower()) or "unknown"
        return f"{vendor}-f{identity['family']}-m{identity['model']}"
    if identity.get("implementer") and identity.get("part"):
        return f"arm-{identity['implementer']}-{identity['part']}"
    machine = re.sub(r"[^a-z0-9_]+", "", platform.machine().lower()) or "cpu"
    return f"{machine}-unidentified"


def record_path(path: Union[str, Path]) -> str:
    """A record's path with the part ``CPU`` (``results/bench/CPU/tf-peer.json``) written as this CPU's
    folder (``cpu_folder``): what a bench script's ``--json`` goes through, so that its usage line runs
    as shown and each CPU's records land in their own folder.

    RETURNS (str): the path; unchanged where no part of it is ``CPU``.
    """
    parts = PurePath(path).parts
    if CPU_PLACEHOLDER not in parts:
        return str(path)
    return str(PurePath(*(cpu_folder() if part == CPU_PLACEHOLDER else part for part in parts)))


# the flags that decide which kernels run: vector width, bf16 and int8 arithmetic, AMX tiles
FLAGS_THAT_MATTER = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "avx512_fp16", "amx_bf16", "amx_int8", "amx_tile")


def cpu_flags() -> list:
    """RETURNS (list): which of ``FLAGS_THAT_MATTER`` the CPU has (Linux /proc/cpuinfo; empty elsewhere)."""
    present = set(all_cpu_flags())
    return [flag for flag in FLAGS_THAT_MATTER if flag in present]


def all_cpu_flags() -> list:
    """RETURNS (list): every flag /proc/cpuinfo gives the CPU, sorted (empty elsewhere): what tells two
    CPUs of one instruction set apart where a record lacks their family and model."""
    return sorted(_cpuinfo().get("flags", "").split())


def kernel_variant() -> str:
    """RETURNS (str): the kernel library's variant this process runs (``fast/kernel_variants.py``:
    "portable", "avx2", "avx512", "avx512_vnni", "avx512_bf16"; "off" or "refused: WHY" where none runs)."""
    return kernel_library.variant_record()


def fp32_routes() -> Dict[str, Any]:
    """RETURNS (Dict[str, Any]): whether this torch has oneDNN's linear ops (``onednn_available``) and,
    per model shape optimized in this process so far, what ``fast.payoff.choose_routes`` measured and
    the route it chose in each regime (``chosen``; empty before any)."""
    return {"onednn_available": prepacked.available(), "chosen": payoff.chosen_routes()}
