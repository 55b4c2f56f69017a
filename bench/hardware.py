"""What this machine can do, measured in the same process as the model: GEMM peak and matrix-vector bandwidth."""
import time
from typing import Callable, Dict, List, Sequence, Tuple

import torch


def best_time(fn: Callable[[], object], repeats: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def gemm_peak(shapes: Sequence[Tuple[int, int, int]], repeats: int = 5) -> Dict[str, float]:
    """Best float32 torch.mm GFLOP/s over (M, K, N) shapes, at the current torch thread count."""
    result: Dict[str, float] = {}
    for m, k, n in shapes:
        a, b = torch.randn(m, k), torch.randn(k, n)
        result[f"{m}x{k}x{n}"] = 2.0 * m * k * n / best_time(lambda: torch.mm(a, b), repeats) / 1e9
    result["peak"] = max(result.values())
    return result


def matvec_bandwidth(shapes: List[Tuple[int, int]], repeats: int = 10) -> Dict[str, float]:
    """GB/s of float32 weights streamed by one-row products x @ W^T over all (K, N) weights in turn.

    Both memory layouts of W are tried and the faster counts: this is the bound for one sentence.
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
    result["bandwidth"] = max(result["row_major"], result["column_major"])
    result["megabytes"] = total / 1e6
    return result


class GemmBound:
    """The time ``flops`` of float32 matrix products take at a large, efficient shape.

    Runs ``fraction`` of them (whole products) and scales, so it can be timed next to a workload.
    """

    def __init__(self, flops: float, shape: Tuple[int, int, int] = (2048, 2048, 2048), fraction: float = 0.25):
        m, k, n = shape
        self.a, self.b = torch.randn(m, k), torch.randn(k, n)
        per_call = 2.0 * m * k * n
        self.calls = max(1, round(flops * fraction / per_call))
        self.scale = flops / (self.calls * per_call)

    def __call__(self) -> float:
        start = time.perf_counter()
        for _ in range(self.calls):
            torch.mm(self.a, self.b)
        return (time.perf_counter() - start) * self.scale


class MatvecBound:
    """The time to read the given weights once per timestep as one-row products, and nothing else.

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
