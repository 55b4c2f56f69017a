"""int8 products with each input row quantized on its own: what precision "int8" computes.

torch's dynamic int8 products (fbgemm, oneDNN) quantize an input with one range for the whole
tensor, so a sentence's int8 vectors depended on the other rows of its batch, and their one-row
products read the weights at no steady rate on a loaded AMD EPYC (0.68-2.24x fp32 one sentence at a
time, docs/speed.md). Here every row has its own range, symmetric 8 bits (``q = round(x / s)``,
``s = max|x| / 127``), every output its own weight scale, and the sums are exact in int32, so a row's
result depends on that row alone: the same alone, in any batch, and whichever code computes it.

``csrc/int8_rows.cpp`` (in the kernel library, ``kernel_library.py``) reads weights packed once
per weights version (``pack``) in one pass, four AVX512-VNNI ``vpdpbusd`` per 256-byte line in the
``avx512_vnni`` and ``avx512_bf16`` variants (``kernel_variants.py``; a portable loop in the others), any number of rows
(four at a time share each line). ``reference`` is the
same math in torch: the definition the kernel is held to, bit for bit (tests/fast/test_int8_rows.py).

``cells`` runs a timestep's recurrent product and its cells in one call: the weights packed by unit
(``pack_cells``: each block of 64 outputs the four gates of 16 units), so that a block's sums give
whole units, whose gates (the product, its bias and the step's input products) go straight into
``lstm_cells``' arithmetic in a 64-float tile. The gates are never written out nor read back: the
same values as ``product`` then ``lstm_cells``, bit for bit, without two passes over a (D, n, 4 * dim)
buffer a timestep.
"""
from typing import NamedTuple, Optional

import torch

from . import kernel_library

BLOCK = 64  # outputs per packed block (csrc/int8_rows.cpp)
GROUP = 4  # inputs per vpdpbusd lane
UNITS = BLOCK // 4  # units a block of weights packed by unit holds (their four gates each)


class Int8Weights(NamedTuple):
    """(D, out, in) weights quantized per output and packed for the kernel."""

    packed: torch.Tensor  # (D, blocks, groups, 256) int8: see ``pack``
    offsets: torch.Tensor  # (D, out) int32: 128 x each output's weight sum (the kernel's unsigned shift)
    scales: torch.Tensor  # (D, out) float32
    width: int  # inputs (in)
    by_unit: bool = False  # outputs in ``unit_order`` (``pack_cells``), for ``cells``


def rows_op():
    """The kernel library's ``int8_rows`` op (of the variant in use) where it is available, else None."""
    ops = kernel_library.library()
    return None if ops is None else ops.int8_rows


def cells_op():
    """The kernel library's ``int8_cells`` op (of the variant in use) where it is available, else None."""
    ops = kernel_library.library()
    return getattr(ops, "int8_cells", None) if ops is not None else None


def native() -> bool:
    """Whether the kernel was built with AVX512-VNNI (else its portable loop runs: the same sums, slow)."""
    ops = kernel_library.library()
    return ops is not None and bool(ops.int8_native())


def quantize_weights(weights: torch.Tensor) -> torch.Tensor:
    """RETURNS (Tensor): (D, out) float32 scales, ``max |w| / 127`` of each output's weights (1 where all are 0)."""
    amax = weights.abs().amax(dim=2)
    return torch.where(amax > 0, amax / 127.0, torch.ones_like(amax))


def pack(weights: torch.Tensor) -> Int8Weights:
    """(D, out, in) float32 weights (any strides; a linear layer's ``weight`` is (out, in)) quantized
    per output (``round(w / scale)``) and laid out as the kernel reads them: (D, blocks of 64 outputs,
    groups of 4 inputs, 64 x 4), zero-padded to whole groups and blocks.

    RETURNS (Int8Weights): the packed weights, offsets, scales and width.
    """
    weights = weights.detach().float()
    n_dir, out, width = weights.shape
    scales = quantize_weights(weights)
    quantized = torch.round(weights / scales[:, :, None]).clamp_(-127, 127).to(torch.int8)
    blocks, groups = -(-out // BLOCK), -(-width // GROUP)
    padded = torch.zeros(n_dir, blocks * BLOCK, groups * GROUP, dtype=torch.int8)
    padded[:, :out, :width] = quantized
    packed = padded.view(n_dir, blocks, BLOCK, groups, GROUP).permute(0, 1, 3, 2, 4).contiguous()
    offsets = quantized.sum(dim=2, dtype=torch.int32) * 128
    return Int8Weights(packed.view(n_dir, blocks, groups, BLOCK * GROUP), offsets.contiguous(), scales.contiguous(), width)


def unpack(weights: Int8Weights) -> torch.Tensor:
    """RETURNS (Tensor): the (D, out, in) int8 weights that ``pack`` quantized."""
    n_dir, blocks, groups = weights.packed.shape[:3]
    levels = weights.packed.view(n_dir, blocks, groups, BLOCK, GROUP).permute(0, 1, 3, 2, 4)
    return levels.reshape(n_dir, blocks * BLOCK, groups * GROUP)[:, : weights.offsets.shape[1], : weights.width]


def product(
    x: torch.Tensor,
    weights: Int8Weights,
    out: torch.Tensor,
    *,
    bias: Optional[torch.Tensor] = None,
    add: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """``out[d] = x[d] @ W[d].T (+ bias[d]) (+ add[d])`` in int8 (``reference``'s math) on the kernel,
    for (D, n, in) float32 ``x``, ``out`` and ``add`` (rows contiguous), (D, out) ``bias``.

    RETURNS (Tensor): ``out``.
    """
    op = rows_op()
    if op is None:
        raise RuntimeError("the compiled library is not available: check rows_op() first")
    op(x, weights.packed, weights.offsets, weights.scales, bias, add, out)
    return out


def unit_order(dim: int) -> torch.Tensor:
    """The gates' outputs (4 * dim, in the order [i, j, f, o] of ``dim`` units each) in the order
    ``pack_cells`` packs them: block b the four gates of units [16b, 16b + 16), gate g of unit 16b + u
    at place 64b + 16g + u. RETURNS (Tensor): for each place, the output it holds."""
    if dim % UNITS:
        raise ValueError(f"weights packed by unit need a multiple of {UNITS} units, not {dim}")
    blocks = torch.arange(dim // UNITS)[:, None, None] * UNITS
    gates = torch.arange(4)[None, :, None] * dim
    units = torch.arange(UNITS)[None, None, :]
    return (blocks + gates + units).flatten()


def pack_cells(weights: torch.Tensor, bias: Optional[torch.Tensor]):
    """Recurrent weights (D, 4 * dim, in) and their bias (D, 4 * dim) or None, their outputs in
    ``unit_order`` and packed for ``cells``.

    RETURNS (Tuple[Int8Weights, Optional[Tensor]]): the packed weights and the bias in that order.
    """
    order = unit_order(weights.shape[1] // 4)
    packed = pack(weights.detach()[:, order])._replace(by_unit=True)
    return packed, None if bias is None else bias.detach().float()[:, order].contiguous()


def cells(
    x: torch.Tensor, weights: Int8Weights, bias: Optional[torch.Tensor], add: torch.Tensor, cell: torch.Tensor,
    hidden: torch.Tensor, cell_clip: Optional[float],
) -> torch.Tensor:
    """A timestep of running rows: gates ``x[d] @ W[d].T + bias[d] + add[d]`` in int8 (``product``'s
    math) on weights from ``pack_cells``, then their cells, as ``lstm_cells`` computes them. x (D, n,
    in), add (D, n, 4 * dim) and hidden (D, n, dim, written) float32 with contiguous rows; cell (D, B,
    dim) contiguous, its first n rows of each direction updated.

    RETURNS (Tensor): ``hidden``.
    """
    op = cells_op()
    if op is None:
        raise RuntimeError("the compiled library is not available: check cells_op() first")
    op(x, weights.packed, weights.offsets, weights.scales, bias, add, cell, hidden, cell_clip)
    return hidden


def quantize_rows(x: torch.Tensor):
    """Each row of (..., in) float32 ``x`` on its own: RETURNS (Tuple[Tensor, Tensor]) the int8 levels
    ``round(x / s)`` and the (..., 1) scales ``s = max |x| / 127`` (1 for a row of zeros)."""
    amax = x.abs().amax(dim=-1, keepdim=True)
    scale = torch.where(amax > 0, amax / 127.0, torch.ones_like(amax))
    return torch.round(x / scale).clamp_(-127, 127).to(torch.int8), scale


def reference(
    x: torch.Tensor, weights: Int8Weights, *, bias: Optional[torch.Tensor] = None, add: Optional[torch.Tensor] = None
) -> torch.Tensor:
    """What ``product`` computes, in torch: rows quantized by ``quantize_rows``, exact int32 sums
    (``torch._int_mm``), then ``float(sum) * s * w_scale (+ bias) (+ add)`` in that order.

    RETURNS (Tensor): (D, n, out) float32.
    """
    levels, scale = quantize_rows(x.float())
    quantized = unpack(weights)
    rows = []
    for d in range(x.shape[0]):
        sums = torch._int_mm(levels[d], quantized[d].t().contiguous())
        y = sums.float() * scale[d] * weights.scales[d]
        if bias is not None:
            y = y + bias[d]
        rows.append(y if add is None else y + add[d])
    return torch.stack(rows)
