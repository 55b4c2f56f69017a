"""This machine's memory bandwidth, measured directly: a read-only sum and STREAM-like copy and triad
over buffers several times larger than the last-level cache, and the cache sizes.

    python -m bench.bandwidth --output results/bench/CPU/bandwidth.json

(``CPU``: this CPU's folder, ``spacy_elmo.records.machine.cpu_folder``.) Kernels (as STREAM counts
them: bytes the kernel names, one read per operand and one write per result, without the extra read
a cache line costs before it is written):

- read: ``s = sum(b)``, 1 array x itemsize bytes per element, nothing written: the rate at which
  the machine reads, which is what one sentence at a time does with the weights (each timestep
  reads them and writes a few rows): the memory roof of ``bench_tf_peer``;
- copy: ``a = b``, 2 arrays x itemsize bytes per element (kept for reference: its writes cost a
  read of each line first, which STREAM does not count, so it understates what a reader gets);
- triad: ``a = b + s * c``, 3 arrays x itemsize bytes per element.

Backends: torch (one fused pass, ``torch.add(b, c, alpha=s, out=a)``, ``torch.sum(b, out=s)``;
parallel over the torch thread count, measured at each of ``--threads``) and numpy (one thread:
numpy's elementwise loops do not run in parallel; the triad runs block by block so that ``s * c``
stays in L1/L2 before the add, and the memory traffic is the three arrays'). Every measurement is
timed ``--repeats`` times; the record keeps each time, the best, the median and the range. A shared
machine moves: the load average is recorded before and after.
"""
import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import torch

from spacy_elmo.records.machine import all_cpu_flags, cpu_identity, cpu_model, record_path
from spacy_elmo.records.provenance import mark_start, provenance

from .workloads import bench_command

KERNEL_ARRAYS = {"read": 1, "copy": 2, "triad": 3}  # arrays a kernel reads or writes, as STREAM counts bytes
SCALAR = 3.0
MIB = 1 << 20
NUMPY_BLOCK = 1 << 15  # elements per block of the numpy triad: 256 KiB of float64, within L2


def _read(path: Path) -> Optional[str]:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        return None


def parse_size(text: str) -> int:
    """``"32K"``, ``"1024K"``, ``"32768K"``, ``"2 MiB"``, ``"48 KiB"`` -> bytes."""
    text = text.strip().replace(" ", "").upper().replace("IB", "").rstrip("B")
    factor = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    number = text[:-1] if text[-1:] in "KMG" else text
    return int(float(number) * factor)


def cache_sizes(root: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> Dict[str, Dict]:
    """The caches CPU 0 sees, by name (L1d, L1i, L2, L3): size in bytes, the CPUs sharing it, and
    where it was read. From sysfs (``cpu0/cache/indexN``); where that is missing, from ``lscpu``
    (whose sizes are totals over instances, so they are divided by the instance count it gives)."""
    caches: Dict[str, Dict] = {}
    for index in sorted(root.glob("index*")):
        level, kind, size = (_read(index / name) for name in ("level", "type", "size"))
        if not (level and kind and size):
            continue
        name = f"L{level}" + {"Data": "d", "Instruction": "i"}.get(kind, "")
        caches[name] = {"bytes": parse_size(size), "shared_cpu_list": _read(index / "shared_cpu_list"),
                        "source": f"sysfs cpu0 cache {index.name}"}
    return caches or _lscpu_caches()


def _lscpu_caches() -> Dict[str, Dict]:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return {}
    caches: Dict[str, Dict] = {}
    for line in out.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if not key.endswith(" cache") or not value.strip():
            continue
        name = key.split()[0]
        total, _, rest = value.strip().partition("(")
        instances = int(rest.split()[0]) if rest[:1].isdigit() else 1
        caches[name] = {"bytes": parse_size(total) // instances, "instances": instances, "source": "lscpu"}
    return caches


def cpu_record() -> Dict:
    """CPU model, its vendor, family and model, all its flags (Linux /proc/cpuinfo), logical CPUs, and
    torch's kernel level."""
    return {"model": cpu_model(), "identity": cpu_identity(), "flags": all_cpu_flags(), "cpu_count": os.cpu_count(),
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability()}


def last_level_cache(caches: Dict[str, Dict]) -> int:
    """Bytes of the largest cache (0 if none is known)."""
    return max((c["bytes"] for c in caches.values()), default=0)


def bytes_moved(kernel: str, elements: int, itemsize: int) -> int:
    """Bytes one pass of ``kernel`` over ``elements`` counts (STREAM's convention)."""
    return KERNEL_ARRAYS[kernel] * elements * itemsize


def _torch_kernel(kernel: str, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> Callable[[], None]:
    if kernel == "read":
        return lambda: torch.sum(b, dim=0, out=a)
    if kernel == "copy":
        return lambda: a.copy_(b)
    return lambda: torch.add(b, c, alpha=SCALAR, out=a)


def _numpy_kernel(kernel: str, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> Callable[[], None]:
    if kernel == "read":
        return lambda: np.sum(b, out=a)
    if kernel == "copy":
        return lambda: np.copyto(a, b)
    bounds = [(i, min(i + NUMPY_BLOCK, len(a))) for i in range(0, len(a), NUMPY_BLOCK)]

    def triad() -> None:
        for i, j in bounds:
            out = a[i:j]
            np.multiply(c[i:j], SCALAR, out=out)
            np.add(out, b[i:j], out=out)

    return triad


def measure(kernel: str, elements: int, *, backend: str = "torch", threads: int = 1, repeats: int = 10,
            dtype: str = "float64") -> Dict:
    """Time ``kernel`` over arrays of ``elements`` ``dtype`` values, ``repeats`` times after one
    untimed pass (which also faults the pages in).

    RETURNS (Dict): kernel, backend, threads, dtype, elements, array_bytes, bytes_per_pass, seconds
        (every repeat), and GB/s (1e9 bytes) best, median, min; check (the result verified).
    """
    if kernel not in KERNEL_ARRAYS:
        raise ValueError(f"unknown kernel {kernel!r}: one of {sorted(KERNEL_ARRAYS)}")
    itemsize = np.dtype(dtype).itemsize
    previous = torch.get_num_threads()
    # only the arrays the kernel names: a read-only pass writes one number, a copy reads no c
    out_shape = () if kernel == "read" else (elements,)
    c_shape = (elements,) if kernel == "triad" else (1,)
    if backend == "torch":
        torch.set_num_threads(threads)
        tdtype = getattr(torch, dtype)
        b = torch.arange(elements, dtype=tdtype)
        c = torch.full(c_shape, 2.0, dtype=tdtype)
        a = torch.empty(out_shape, dtype=tdtype)
        run = _torch_kernel(kernel, a, b, c)
    elif backend == "numpy":
        if threads != 1:
            raise ValueError("numpy's elementwise loops run on one thread: threads must be 1")
        b = np.arange(elements, dtype=dtype)
        c = np.full(c_shape, 2.0, dtype=dtype)
        a = np.empty(out_shape, dtype=dtype)
        run = _numpy_kernel(kernel, a, b, c)
    else:
        raise ValueError(f"unknown backend {backend!r}: torch or numpy")
    try:
        run()
        seconds: List[float] = []
        for _ in range(repeats):
            start = time.perf_counter()
            run()
            seconds.append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(previous)
    check = _verified(kernel, a, elements, dtype)
    moved = bytes_moved(kernel, elements, itemsize)
    rates = sorted(moved / s / 1e9 for s in seconds)
    return {
        "kernel": kernel, "backend": backend, "threads": threads, "dtype": dtype, "elements": elements,
        "array_bytes": elements * itemsize, "arrays": KERNEL_ARRAYS[kernel], "bytes_per_pass": moved,
        "seconds": seconds, "gb_per_s_best": rates[-1], "gb_per_s_median": statistics.median(rates),
        "gb_per_s_min": rates[0], "check": check,
    }


def _verified(kernel: str, a, elements: int, dtype: str) -> bool:
    """Whether the result is what the kernel says (so nothing was skipped): a[i] = i (+ 3 * 2), or the
    sum of 0 .. elements - 1 (to float32's rounding over a long sum: a part in a thousand)."""
    if kernel == "read":
        expected = elements * (elements - 1) / 2
        return bool(abs(float(a) - expected) <= (1e-3 if dtype == "float32" else 1e-9) * max(expected, 1.0))
    expected = (elements - 1) + (SCALAR * 2.0 if kernel == "triad" else 0.0)
    return bool(float(a[-1]) == expected and float(a[0]) == expected - (elements - 1))


def run_all(array_bytes: int, threads: Sequence[int] = (1, 2), repeats: int = 10,
            backends: Sequence[str] = ("torch", "numpy"), dtype: str = "float64") -> List[Dict]:
    """Read, copy and triad for every backend and thread count (numpy: one thread only)."""
    elements = max(1, array_bytes // np.dtype(dtype).itemsize)
    results = []
    for backend in backends:
        for n in threads if backend == "torch" else [1]:
            for kernel in KERNEL_ARRAYS:
                results.append(measure(kernel, elements, backend=backend, threads=n, repeats=repeats, dtype=dtype))
    return results


def kernel_summary(results: Sequence[Dict], kernel: str) -> Dict[str, Dict]:
    """A torch kernel by thread count: {threads: {best, median, min}} GB/s."""
    return {
        str(r["threads"]): {"best": r["gb_per_s_best"], "median": r["gb_per_s_median"], "min": r["gb_per_s_min"]}
        for r in results if r["kernel"] == kernel and r["backend"] == "torch"
    }


def default_array_bytes(caches: Dict[str, Dict], times_llc: int = 4, floor: int = 64 * MIB) -> int:
    """Bytes per array: ``times_llc`` x the last-level cache, at least ``floor``."""
    return max(times_llc * last_level_cache(caches), floor)


def bandwidth_record(threads: Sequence[int] = (1, 2), repeats: int = 10, array_bytes: Optional[int] = None,
                     backends: Sequence[str] = ("torch", "numpy")) -> Dict:
    """Caches, CPU, load before and after, and every measurement (see ``run_all``)."""
    caches = cache_sizes()
    size = array_bytes or default_array_bytes(caches)
    load_before = os.getloadavg()
    started = time.time()
    results = run_all(size, threads, repeats, backends)
    return {
        "cpu": cpu_record(),
        "caches": caches,
        "array_bytes": size,
        "array_over_last_level_cache": size / last_level_cache(caches) if last_level_cache(caches) else None,
        "bytes_counted": "STREAM's: one read per operand, one write per result (read 1 array, copy 2, triad 3); "
                         "the read of each written line before it is written (write-allocate) is not counted",
        "load_average_before": list(load_before),
        "load_average_after": list(os.getloadavg()),
        "seconds": time.time() - started,
        "results": results,
        "read_torch_gb_per_s": kernel_summary(results, "read"),
        "copy_torch_gb_per_s": kernel_summary(results, "copy"),
        "triad_torch_gb_per_s": kernel_summary(results, "triad"),
    }


def summary_lines(record: Dict) -> List[str]:
    caches = ", ".join(f"{name} {c['bytes'] // 1024} KiB" for name, c in record["caches"].items())
    lines = [f"{record['cpu']['model']}; caches (per CPU 0): {caches}; arrays of {record['array_bytes'] / MIB:.0f} MiB; "
             f"load average before {record['load_average_before'][0]:.2f}, after {record['load_average_after'][0]:.2f}",
             "| kernel | backend | threads | GB/s best | median | min | check |", "|---|---|---:|---:|---:|---:|---|"]
    for r in record["results"]:
        lines.append(f"| {r['kernel']} | {r['backend']} | {r['threads']} | {r['gb_per_s_best']:.1f} | "
                     f"{r['gb_per_s_median']:.1f} | {r['gb_per_s_min']:.1f} | {'ok' if r['check'] else 'WRONG'} |")
    return lines


def main(argv: Optional[List[str]] = None) -> Dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=lambda text: Path(record_path(text)), default=None,
                        help="JSON file to write (a part CPU of the path: this CPU's folder, records.machine.cpu_folder)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="torch thread counts")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--array-mib", type=float, default=None,
                        help="MiB per array (default: 4 x the last-level cache, at least 64)")
    args = parser.parse_args(argv)
    command = bench_command("bench.bandwidth", argv)
    mark_start(command)
    record: Dict = {"command": command}
    record.update(bandwidth_record(args.threads, args.repeats,
                                   int(args.array_mib * MIB) if args.array_mib else None))
    record["provenance"] = provenance(command, model=None, model_note="none: a memory bandwidth measurement",
                                      data={}, data_note="none read: the arrays are generated")
    print("\n".join(summary_lines(record)))
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(record, indent=2), encoding="utf-8")
    return record


if __name__ == "__main__":
    main()
