"""What this machine can do, measured in the same process as the model.

- ``gemm_peak`` / ``GemmBound``: float32 products at large shapes (GFLOP/s), on the fastest route
  this machine has (``spacy_elmo.fast.prepacked``: torch's ``mm``, MKL on CPU, or oneDNN's on
  prepacked weights, which runs two to three times MKL's rate on an AMD EPYC with AVX-512): a bound
  taken from MKL alone would measure such a machine against a fraction of itself.
- ``matvec_rate`` / ``MatvecRate``: the GB/s of weights torch's own one-row products reach on the
  model's recurrent weight shapes. It is not the memory bandwidth: it moves with torch's kernels and
  from run to run, and weights that fit in cache are read faster than memory delivers them.
- ``memory_record``: the memory bandwidth measured directly (a STREAM-like triad over buffers
  several times the last-level cache, ``bench/bandwidth.py``) and the cache sizes; with
  ``weights_regime`` it says whether the weights a timestep reads fit in cache, so whether
  bytes / triad bandwidth is a floor on the time of a step.
"""
import os
import time
from typing import Callable, Dict, List, Sequence, Tuple

import torch

from spacy_elmo.fast import prepacked

from . import bandwidth


def best_time(fn: Callable[[], object], repeats: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def product_routes(m: int, k: int, n: int) -> Dict[str, Callable[[], object]]:
    """An (M, K) x (K, N) float32 product on each route this machine has: ``"torch"`` (``torch.mm``)
    and, where torch has it, ``"onednn"`` (oneDNN's on weights prepacked once)."""
    a, b = torch.randn(m, k), torch.randn(k, n)
    routes: Dict[str, Callable[[], object]] = {prepacked.TORCH: lambda: torch.mm(a, b)}
    if prepacked.available():
        packed = prepacked.pack(b.t())
        routes[prepacked.ONEDNN] = lambda: prepacked.product(a, packed)
    return routes


def gemm_peak(shapes: Sequence[Tuple[int, int, int]], repeats: int = 5) -> Dict:
    """Best float32 GFLOP/s over (M, K, N) shapes on the fastest route, at the current torch thread count.

    RETURNS (Dict): per shape ("MxKxN") the best route's GFLOP/s; "peak", the best of them; "routes",
        per shape each route's GFLOP/s; "route", the route of the peak.
    """
    result: Dict = {"routes": {}}
    for m, k, n in shapes:
        name = f"{m}x{k}x{n}"
        rates = {route: 2.0 * m * k * n / best_time(fn, repeats) / 1e9 for route, fn in product_routes(m, k, n).items()}
        result["routes"][name] = rates
        result[name] = max(rates.values())
    best = max(result["routes"], key=lambda name: result[name])
    result["peak"] = result[best]
    result["route"] = max(result["routes"][best], key=result["routes"][best].get)
    return result


def matvec_rate(shapes: List[Tuple[int, int]], repeats: int = 10) -> Dict[str, float]:
    """GB/s of float32 weights read by torch's one-row products x @ W^T over all (K, N) weights in turn.

    Both memory layouts of W are tried and the faster counts ("rate"). Weights that fit in cache are
    read from it, so for small models this can exceed the memory bandwidth.
    """
    result: Dict[str, float] = {}
    total = sum(k * n for k, n in shapes) * 4
    for layout in ("row_major", "column_major"):
        weights = [torch.randn(n, k) if layout == "row_major" else torch.randn(k, n).t() for k, n in shapes]
        inputs = [torch.randn(1, k) for k, _ in shapes]

        def run() -> None:
            for x, w in zip(inputs, weights):
                torch.mm(x, w.t())

        result[layout] = total / best_time(run, repeats) / 1e9
        del weights
    result["rate"] = max(result["row_major"], result["column_major"])
    result["megabytes"] = total / 1e6
    return result


class GemmBound:
    """The time ``flops`` of float32 matrix products take at a large, efficient shape, on ``route``
    (``product_routes``; ``gemm_peak`` says which route is fastest here).

    Runs ``fraction`` of them (whole products) and scales, so it can be timed next to a workload.
    """

    def __init__(
        self, flops: float, shape: Tuple[int, int, int] = (2048, 2048, 2048), fraction: float = 0.25,
        route: str = prepacked.TORCH,
    ):
        m, k, n = shape
        self.product = product_routes(m, k, n)[route]
        per_call = 2.0 * m * k * n
        self.calls = max(1, round(flops * fraction / per_call))
        self.scale = flops / (self.calls * per_call)

    def __call__(self) -> float:
        start = time.perf_counter()
        for _ in range(self.calls):
            self.product()
        return (time.perf_counter() - start) * self.scale


class MatvecRate:
    """The time torch's one-row products take to read the given weights once per timestep, and nothing else.

    What a timestep's recurrent products cost at torch's own speed on these weights: a reference
    rate, not a hardware bound (it varies with torch's kernels, and cached weights read faster).

    layouts (List[List[Tensor]]): ways to hold the same weights: (K, N) operands of ``x @ w``, or
        (D, K, N) stacks for batched products (``bmm``), as the model holds them (its own memory).
        Each is timed; the fastest counts.
    steps (int): timesteps of the workload.
    """

    def __init__(self, layouts: List[List[torch.Tensor]], steps: int) -> None:
        self.layouts = [[(w, torch.randn(*w.shape[:-2], 1, w.shape[-2])) for w in weights] for weights in layouts]
        self.steps = steps

    def __call__(self) -> float:
        best = float("inf")
        for operands in self.layouts:
            start = time.perf_counter()
            for _ in range(self.steps):
                for w, x in operands:
                    torch.matmul(x, w)
            best = min(best, time.perf_counter() - start)
        return best


def memory_record(threads: Sequence[int], repeats: int = 10) -> Dict:
    """Cache sizes, the load average, and the torch triad's, copy's and read-only sum's GB/s (best,
    median, min) at each thread count, over arrays of 4 x the last-level cache (``bench/bandwidth.py``)."""
    caches = bandwidth.cache_sizes()
    size = bandwidth.default_array_bytes(caches)
    results = bandwidth.run_all(size, threads=sorted(set(threads)), repeats=repeats, backends=("torch",))
    return {
        "caches": {name: c["bytes"] for name, c in caches.items()},
        "array_bytes": size,
        "load_average": list(os.getloadavg()),
        "triad_gb_per_s": bandwidth.kernel_summary(results, "triad"),
        "copy_gb_per_s": bandwidth.kernel_summary(results, "copy"),
        "read_gb_per_s": bandwidth.kernel_summary(results, "read"),
    }


def weights_regime(weight_bytes: int, caches: Dict[str, int], threads: int) -> str:
    """Where weights of ``weight_bytes`` read every timestep can stay between timesteps: "L2" (within
    the private L2s of ``threads`` cores), "L3", or "memory" (larger than the last-level cache:
    only then is bytes / memory bandwidth a floor on a step's time). "unknown" without cache sizes."""
    if not caches:
        return "unknown"
    if "L2" in caches and weight_bytes <= caches["L2"] * threads:
        return "L2"
    if "L3" in caches and weight_bytes <= caches["L3"]:
        return "L3"
    return "memory"
