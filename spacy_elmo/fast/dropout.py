"""Training's dropout on the kernel library: the same distribution as ``torch.nn.functional.dropout``
(each element kept with probability ``1 - p`` and then scaled by ``1 / (1 - p)``), its mask made by
hashing each element's index with a seed drawn from torch's generator.

torch's CPU dropout draws a Bernoulli variable per element from its Mersenne Twister, one element at
a time (docs/pretraining.md has what that cost en_small's training step). The hash (``csrc/cell_math.cpp``) is vectorized and split between
threads, and its mask depends on the index and the seed alone: the backward pass hashes the same
indices again rather than keeping the mask, and the threads' split, the dtype (float32 or bfloat16)
and the machine change nothing. ``torch.manual_seed`` still makes a run repeat, since the seed comes
from torch's generator, but the masks are not the ones torch's own dropout would draw.

Other dtypes and devices, or no kernel library, take ``torch.nn.functional.dropout``;
``torch_dropout()`` forces that (benchmarks' A/B).
"""
from typing import Any, Optional

import torch
from torch.autograd.function import once_differentiable

from . import kernel_library
from .switches import ThreadSwitch

_TORCH_DROPOUT = ThreadSwitch()
# the mask keeps an element where a 32-bit hash falls below (1 - p) * 2^32
_RANGE = 2**32


def torch_dropout():
    """Within this block (this thread), ``dropout`` is torch's own."""
    return _TORCH_DROPOUT.on()


def dropout_op(x: torch.Tensor) -> Optional[Any]:
    """The kernel library's ``dropout`` op where it runs ``x`` (float32 or bfloat16 on the CPU, the
    library available, not within ``torch_dropout``), else None."""
    if x.device.type != "cpu" or x.dtype not in (torch.float32, torch.bfloat16) or _TORCH_DROPOUT.active:
        return None
    ops = kernel_library.library()
    return getattr(ops, "dropout", None) if ops is not None else None


def threshold(p: float) -> int:
    """The hash bound that keeps an element with probability ``1 - p`` (to within 2^-32)."""
    return min(_RANGE - 1, max(0, round((1.0 - p) * _RANGE)))


def dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """``torch.nn.functional.dropout(x, p, training)``'s contract (a new tensor; ``x`` unchanged),
    on the kernel library where ``dropout_op`` allows."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    op = dropout_op(x)
    if not training or p == 0.0 or p == 1.0 or op is None or x.numel() == 0:
        return torch.nn.functional.dropout(x, p, training)
    seed = int(torch.randint(-(2**63), 2**63 - 1, (), dtype=torch.int64))
    return _HashDropout.apply(x, p, seed, op)


class _HashDropout(torch.autograd.Function):
    """Forward: ``x`` masked and scaled. Backward: the gradient through the same mask (hashed again)."""

    @staticmethod
    def forward(ctx, x, p, seed, op):  # type: ignore[override]
        ctx.p, ctx.seed, ctx.op = p, seed, op
        return _apply(op, x, p, seed)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):  # type: ignore[override]
        return _apply(ctx.op, grad, ctx.p, ctx.seed), None, None, None


def _apply(op: Any, x: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    op(x, out, seed, threshold(p), 1.0 / (1.0 - p))
    return out
