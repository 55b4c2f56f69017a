"""The instruction sets the kernel library is built for, and the one this CPU runs.

The kernels' arithmetic (``csrc/cell_math.cpp``, ``bf16_rows.cpp``, ``int8_rows.cpp``) is compiled
once per variant, each its own library (``kernel_library.py``), so that every code path is built and
tested wherever a CPU can run it, not only the one ``-march=native`` picks on the build machine: an
AVX-512 machine builds and tests the AVX2 path of a laptop and the portable loops of the bf16 and
int8 products too. On x86-64:

| variant | compiler flags | what the CPU needs (``/proc/cpuinfo`` flags) |
|---|---|---|
| ``portable`` | ``-march=x86-64`` | nothing beyond x86-64 (SSE2) |
| ``avx2`` | ``-march=x86-64-v3`` | AVX2, FMA, BMI1/2, F16C, LZCNT, MOVBE (x86-64-v3) |
| ``avx512`` | ``-march=x86-64-v4`` | x86-64-v3 and AVX-512 F, BW, CD, DQ, VL (x86-64-v4) |
| ``avx512_vnni`` | the same and ``-mavx512vnni`` | x86-64-v4 and AVX512-VNNI (the int8 products' ``vpdpbusd``) |
| ``avx512_bf16`` | the same and ``-mavx512bf16`` | x86-64-v4, AVX512-VNNI and AVX512-BF16 (the bf16 products' ``vdpbf16ps``) |

Elsewhere (aarch64, Apple silicon) ``portable`` is the compiler's default target and ``native``
its ``-march=native`` (the default there, as before variants). The dispatcher takes the last
variant of the table whose needs the CPU meets (``chosen``); ``$SPACY_ELMO_KERNEL_VARIANT`` names
another, and one the CPU cannot run is refused (``VariantError``), since running it would stop the
process on an illegal instruction.
"""
import os
import platform
from typing import Dict, FrozenSet, List, NamedTuple, Optional, Sequence, Tuple

import torch

ENV = "SPACY_ELMO_KERNEL_VARIANT"  # a variant's name: use it instead of the best this CPU runs


class VariantError(ValueError):
    """``$SPACY_ELMO_KERNEL_VARIANT`` names no variant, or one this CPU cannot run."""


class Variant(NamedTuple):
    """One build of the kernels' arithmetic."""

    name: str
    flags: Tuple[str, ...]  # compiler flags of the arithmetic's sources
    needs: FrozenSet[str]  # the /proc/cpuinfo flags of the instructions the compiler may use

    @property
    def namespace(self) -> str:
        """The ops' namespace, ``torch.ops.NAMESPACE``: one per variant, so variants load side by side."""
        return f"spacy_elmo_{self.name}"


# the x86-64 micro-architecture levels as /proc/cpuinfo spells their features (abm: LZCNT, pni: SSE3)
_V2 = frozenset({"cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3"})
_V3 = _V2 | {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"}
_V4 = _V3 | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}
X86 = (
    Variant("portable", ("-march=x86-64", "-mtune=generic"), frozenset()),
    Variant("avx2", ("-march=x86-64-v3",), _V3),
    Variant("avx512", ("-march=x86-64-v4",), _V4),
    Variant("avx512_vnni", ("-march=x86-64-v4", "-mavx512vnni"), _V4 | {"avx512_vnni"}),
    Variant("avx512_bf16", ("-march=x86-64-v4", "-mavx512bf16", "-mavx512vnni"), _V4 | {"avx512_bf16", "avx512_vnni"}),
)
OTHER = (Variant("portable", (), frozenset()), Variant("native", ("-march=native",), frozenset()))
# what torch's own probes say where there is no /proc/cpuinfo (an Intel Mac): a stand-in for its flags
_TORCH_PROBES = (("_is_avx2_supported", _V3), ("_is_avx512_supported", _V4),
                 ("_is_avx512_bf16_supported", {"avx512_bf16"}), ("_is_vnni_supported", {"avx512_vnni"}))


def variants(machine: Optional[str] = None) -> Tuple[Variant, ...]:
    """RETURNS (Tuple[Variant, ...]): the variants built for ``machine`` (default: this one's,
    ``platform.machine()``), from the most portable to the fastest."""
    machine = (machine or platform.machine()).lower()
    return X86 if machine in ("x86_64", "amd64") else OTHER


def cpu_flags() -> FrozenSet[str]:
    """RETURNS (FrozenSet[str]): this CPU's feature flags (the ``flags`` line of /proc/cpuinfo; where
    there is none, what torch's CPU probes report, in /proc/cpuinfo's words)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            line = next((line for line in cpuinfo if line.startswith("flags")), None)
        if line is not None:
            return frozenset(line.split(":", 1)[-1].split())
    except OSError:
        pass
    found: set = set()
    for probe, flags in _TORCH_PROBES:
        check = getattr(torch.cpu, probe, None)
        if check is not None and check():
            found |= flags
    return frozenset(found)


def missing(variant: Variant, flags: Optional[FrozenSet[str]] = None) -> List[str]:
    """RETURNS (List[str]): the CPU flags ``variant`` needs and this CPU (or ``flags``) lacks, sorted."""
    have = cpu_flags() if flags is None else flags
    return sorted(variant.needs - have)


def runnable(flags: Optional[FrozenSet[str]] = None, machine: Optional[str] = None) -> Tuple[Variant, ...]:
    """RETURNS (Tuple[Variant, ...]): the variants this CPU (or ``flags``) can run, in ``variants`` order."""
    have = cpu_flags() if flags is None else flags
    return tuple(v for v in variants(machine) if not missing(v, have))


def by_name(name: str, machine: Optional[str] = None) -> Variant:
    """RETURNS (Variant): the variant called ``name``; raises VariantError naming the known ones."""
    known = {v.name: v for v in variants(machine)}
    if name not in known:
        raise VariantError(f"{name!r} is not a kernel variant here; the variants are: {', '.join(known)}")
    return known[name]


def chosen(flags: Optional[FrozenSet[str]] = None, environ: Optional[Dict[str, str]] = None) -> Variant:
    """The variant the kernels run: ``$SPACY_ELMO_KERNEL_VARIANT`` where set, else the fastest this
    CPU runs. Raises VariantError for a name that is no variant, or a variant this CPU cannot run.

    flags (Optional[FrozenSet[str]]): the CPU's flags (default: ``cpu_flags()``).
    environ (Optional[Dict[str, str]]): the environment (default: ``os.environ``).
    RETURNS (Variant): the variant.
    """
    have = cpu_flags() if flags is None else flags
    asked = (os.environ if environ is None else environ).get(ENV, "").strip()
    if not asked:
        return runnable(have)[-1]
    try:
        variant = by_name(asked)
    except VariantError as error:
        raise VariantError(f"${ENV}={asked}: {error}") from None
    lacking = missing(variant, have)
    if lacking:
        runs = ", ".join(v.name for v in runnable(have))
        raise VariantError(f"${ENV}={asked}: this CPU cannot run the {asked} kernels (it lacks {', '.join(lacking)}); "
                           f"it runs: {runs}")
    return variant


def described(names: Sequence[Variant] = ()) -> Dict[str, str]:
    """RETURNS (Dict[str, str]): each variant (default: all of this machine's) and whether this CPU
    runs it ("runs", or what it lacks): what ``python -m spacy_elmo kernels`` shows."""
    have = cpu_flags()
    return {v.name: "runs" if not missing(v, have) else f"needs {', '.join(missing(v, have))}"
            for v in (names or variants())}
