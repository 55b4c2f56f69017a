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
