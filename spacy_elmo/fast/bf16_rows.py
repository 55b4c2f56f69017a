"""bf16 products of a few rows, for the LSTM timesteps of one sentence at a time.

torch's bf16 products of one row read the weights slower than its float32 ones on a CPU without
AMX (docs/speed.md "bf16 one sentence at a time": on an AMD EPYC with AVX512-BF16 the recurrent
product of the full model took longer in bf16 than in fp32), so one sentence in bf16 ran slower
than in fp32 although it reads half the bytes. ``csrc/bf16_rows.cpp`` (in the kernel library,
``kernel_library.py``) reads weights packed once per weights version (``pack``) in one pass,
with AVX512-BF16's ``vdpbf16ps`` in the ``avx512_bf16`` variant (``kernel_variants.py``) and a
portable loop in the others, which the tests hold to the same results on any CPU.

It computes what torch's bf16 product computes, ``bf16(bf16(x) @ bf16(W))`` with float32 sums
(the order of the sums differs, so the results differ at float32 rounding of the sums), so a
timestep takes it or torch's product by the number of rows (``ROWS``) without changing precision:
a sentence gets the same bf16 results, up to that rounding, alone or in a batch.
"""
from typing import Callable, Optional

import torch

from . import kernel_library

# Rows up to which a timestep's products take the packed kernel: it reads the weights once per
# block for all rows (the block stays in L2), while torch's products (AMX, oneDNN) win on many rows.
ROWS = 4
BLOCK = 64  # outputs per packed block (csrc/bf16_rows.cpp)


def rows_op() -> Optional[Callable]:
    """The kernel library's ``bf16_rows`` op (of the variant in use) where it is available, else None."""
    ops = kernel_library.library()
    return None if ops is None else ops.bf16_rows


def native() -> bool:
    """Whether the kernel was built with AVX512-BF16 (else its portable loop runs: correct, slow)."""
    ops = kernel_library.library()
    return ops is not None and bool(ops.bf16_native())


def pack(weights: torch.Tensor) -> torch.Tensor:
    """(D, in, out) right-hand operands (any strides) as the kernel reads them: bfloat16 (rounded to
    nearest even, as ``.to(torch.bfloat16)``), (D, blocks of 64 outputs, pairs of inputs, 64 x 2),
    zero-padded to an even ``in`` and whole blocks.

    RETURNS (Tensor): the packed weights, contiguous.
    """
    n_dir, width, out = weights.shape
    padded = weights.new_zeros(n_dir, width + width % 2, -(-out // BLOCK) * BLOCK, dtype=torch.bfloat16)
    padded[:, :width, :out] = weights
    pairs, blocks = padded.shape[1] // 2, padded.shape[2] // BLOCK
    return padded.view(n_dir, pairs, 2, blocks, BLOCK).permute(0, 3, 1, 4, 2).contiguous().view(n_dir, blocks, pairs, 2 * BLOCK)


def product(x: torch.Tensor, packed: torch.Tensor, out: torch.Tensor, add: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``out[d] = bf16(bf16(x[d]) @ W[d]) + add[d]`` for (D, n, width) float32 ``x``, ``out`` and
    ``add`` (rows contiguous) and ``pack(W)``; RETURNS (Tensor) ``out``."""
    op = rows_op()
    if op is None:
        raise RuntimeError("the compiled library is not available: check rows_op() first")
    op(x, packed, add, out)
    return out
