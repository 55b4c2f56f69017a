"""Both LSTM directions in lockstep: one batched product per timestep for the pair.

The forward and backward LSTMs are independent and see the same batch sizes at every
step. Stacked, their recurrent products become batched products (``baddbmm``/``bmm``),
which MKL runs one direction per thread: on 2 cores 25-40% faster than two threaded
products at 16-64 rows and twice as fast for one row, with identical results; and the
elementwise ops of a step run once for both directions.

The input projections of all timesteps are one batched product for the pair, over the
running positions only (padding rows are left out), into a buffer kept between calls
(``_workspace``). The pair needs each layer's weights of the two directions in
one tensor (``pair_directions``, which ``optimize_for_inference`` calls): the
parameters become views into it, so state_dict(), optimizers and saving see the same values.
With bf16 layers (``precision.py``) the pair's products take bfloat16 copies of the paired weights
(``bf16_weights``) while the gates, cells and outputs stay float32: a few rows on ``bf16_rows``'
kernel, more on the copies prepacked for oneDNN (``bf16_onednn_weights``; ``bmm`` where there is no
oneDNN); with int8 layers the pair's
products take ``int8_rows``' kernel on both directions' weights packed together (``int8_weights``:
each row quantized on its own, the same results as the layers' own int8 products, one call per
product for the pair instead of one a direction). In float32 on the oneDNN route (``prepacked.py``)
every product is each direction's own on its prepacked weights. In float32 on CPU the pair's
timestep loop runs compiled where it can be built (``compiled.py``), else ``in_place.run_in_place``.
``dispatch.py`` decides when the pair runs in lockstep at all.
"""
import threading
import weakref
from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import nn

from ..bilm.lstm import LSTMPLayer, LSTMPStack, State
from . import bf16_rows, compiled, int8_rows, prepacked
from .in_place import run_in_place
from .precision import Kernels, Precision, ReducedPrecisionLinear
from .versions import tensors_version

StackResult = Tuple[List[torch.Tensor], List[State]]
# Each layer's linear maps, and whether the pair holds them transposed (in, out) rather than as
# stored (out, in): whichever streams faster in one-row products (the recurrent one, by 2x).
LINEARS = {"input_linearity": False, "state_linearity": True, "projection": False}
# (2, in, out) weights of a layer pair: input projection, recurrent product, output projection
PairedWeights = Tuple[torch.Tensor, torch.Tensor, torch.Tensor]
# Per thread: each stack's input-projection buffer, kept between layers and calls (see _workspace).
_WORKSPACES = threading.local()


def pair_directions(forward: LSTMPStack, backward: LSTMPStack) -> None:
    """Put each layer's weights of the two directions into shared tensors (same values)."""
    with torch.no_grad():
        for pair in zip(forward.layers, backward.layers):
            if paired_weights(*pair) is not None:
                continue
            for name, transposed in LINEARS.items():
                weights = [getattr(layer, name).weight for layer in pair]
                shared = torch.stack([w.t() if transposed else w for w in weights])
                for w, part in zip(weights, shared):
                    w.data = part.t() if transposed else part


def unpair_directions(forward: LSTMPStack, backward: LSTMPStack) -> None:
    """Give every layer its own row-major weights again (the layout of a freshly built model).

    Weights that have it already are left alone (no copy), so this is cheap on an unpaired model.
    """
    with torch.no_grad():
        for layer in (*forward.layers, *backward.layers):
            for name in LINEARS:
                weight = getattr(layer, name).weight
                owns_storage = weight.untyped_storage().nbytes() == weight.numel() * weight.element_size()
                if weight.is_contiguous() and owns_storage:
                    continue
                weight.data = weight.detach().clone(memory_format=torch.contiguous_format)


def paired_weights(first: LSTMPLayer, second: LSTMPLayer) -> Optional[PairedWeights]:
    """The (2, in, out) right-hand operands of a paired layer pair (in LINEARS order), or None."""
    result = []
    for name, transposed in LINEARS.items():
        a, b = getattr(first, name).weight, getattr(second, name).weight
        out_features, in_features = a.shape
        strides = (1, out_features) if transposed else (in_features, 1)
        if not (
            a.dtype == b.dtype
            and a.device == b.device
            and a.stride() == b.stride() == strides
            and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
            and b.storage_offset() == a.storage_offset() + a.numel()
        ):
            return None
        if transposed:
            result.append(a.as_strided((2, in_features, out_features), (a.numel(), out_features, 1)))
        else:
            result.append(a.as_strided((2, out_features, in_features), (a.numel(), in_features, 1)).transpose(1, 2))
    return result[0], result[1], result[2]


def run_lockstep(
    forward: LSTMPStack,
    backward: LSTMPStack,
    inputs: Tuple[torch.Tensor, torch.Tensor],
    batch_sizes: Sequence[int],
    states: Tuple[List[State], List[State]],
    precision: Precision,
    use_compiled: bool,
    first_inputs: Optional[Tuple[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]] = None,
    route: str = prepacked.TORCH,
) -> Tuple[StackResult, StackResult]:
    """Run both stacks in lockstep, as ``(forward(inputs[0], ...), backward(inputs[1], ...))`` would,
    on paired weights without autograd (``dispatch.run_stacks`` checks that they are).

    precision (Precision): the runner's, one that ``runs_in_lockstep`` accepted for these layers.
    use_compiled (bool): take the compiled timestep loop for float32 (``dispatch.Runner`` asks
        ``compiled.usable`` first; the projections buffer is then float32, contiguous, on CPU).
    first_inputs (Optional[Tuple[Tensor, Tuple[Tensor, Tensor]]]): the inputs as a table of
        distinct rows (U, width) and, per direction, each position's row in it (B, T): then
        ``inputs[d][b, t]`` equals ``table[slots[d][b, t]]`` at every running position, and the
        first layer's input projections are computed once per distinct row.
    route (str): where float32 products run (``prepacked.py``): ``TORCH`` (batched products on the
        paired weights) or ``ONEDNN`` (each direction's on its prepacked weights).
    """
    pairs = list(zip(forward.layers, backward.layers))
    xs = list(inputs)
    results: Tuple[StackResult, StackResult] = (([], []), ([], []))
    rows, times = packed_positions(batch_sizes, xs[0].device)
    for k, pair in enumerate(pairs):
        paired = paired_weights(*pair)
        if paired is None:
            raise ValueError(f"layer pair {k} is not paired: call pair_directions (dispatch.Runner does) first")
        bf16 = precision.kernels is Kernels.BF16
        if bf16:
            paired = bf16_weights(pair, paired)
        quantized = int8_weights(pair) if precision.kernels is Kernels.INT8 else None
        packs = prepacked.pair_packs(pair) if route == prepacked.ONEDNN and not precision.reduced else None
        gates = paired[0].shape[-1]
        # Running positions only, timestep after timestep (no padding rows), both directions in one
        # batched product (MKL then gives each direction its own thread), bias added afterwards
        # (baddbmm with a broadcast bias is slower).
        bias = torch.stack([layer.input_linearity.bias for layer in pair])[:, None]
        projected = _workspace(forward, 2 * len(rows) * gates, xs[0]).view(2, len(rows), gates)
        if packs is not None:  # the bias within the product
            if k == 0 and first_inputs is not None:
                table, slots = first_inputs
                for d in range(2):
                    distinct = prepacked.product(table, packs.inputs[d], packs.input_biases[d])
                    torch.index_select(distinct, 0, gather_running(slots[d], rows, times), out=projected[d])
            else:
                for d in range(2):
                    projected[d].copy_(prepacked.product(gather_running(xs[d], rows, times), packs.inputs[d], packs.input_biases[d]))
        elif k == 0 and first_inputs is not None:
            table, slots = first_inputs
            distinct = _workspace(forward, 2 * table.shape[0] * gates, xs[0], "distinct").view(2, table.shape[0], gates)
            _input_products(table.expand(2, *table.shape), paired[0], quantized, bias, out=distinct)
            for d in range(2):
                torch.index_select(distinct[d], 0, gather_running(slots[d], rows, times), out=projected[d])
        else:
            _input_products(torch.stack([gather_running(x, rows, times) for x in xs]), paired[0], quantized, bias,
                            out=projected)
        pair_states = [states[0][k], states[1][k]]
        if not precision.reduced and use_compiled:  # the loop in C++ (dispatch checked compiled.usable)
            out, finals = compiled.run_pair_compiled(pair, projected, batch_sizes, pair_states, paired[1:], packs)
        else:
            packed_rows = bf16_row_weights(pair, paired_weights(*pair)) if bf16 else None
            low_packs = bf16_onednn_weights(pair, paired_weights(*pair)) if bf16 else None
            out, finals = run_in_place(
                pair, projected, batch_sizes, pair_states, paired[1:], packed=True, fused=True, row_weights=packed_rows,
                int8=None if quantized is None else quantized[1:], onednn=packs, low_packs=low_packs,
            )
        for d, stack in enumerate((forward, backward)):
            y = stack.skip(k, xs[d], out[:, d].transpose(0, 1))
            results[d][0].append(y)
            results[d][1].append(finals[d])
            xs[d] = y
    return results


def runs_in_lockstep(pairs: Sequence[Tuple[LSTMPLayer, LSTMPLayer]], precision: Precision) -> bool:
    """Whether the layer pairs can step in lockstep in ``precision`` (the runner's): its products
    have a lockstep form (``Precision.lockstep``; int8's where ``int8_rows``' kernel is built) and every
    linear map of every layer runs in it (plain linear layers for ``FP32``, its stand-ins otherwise:
    bf16's products then run on bfloat16 copies of the paired weights). Not with module hooks, or
    layers in another precision: the directions then run one after the other."""
    if not precision.lockstep or (precision.kernels is Kernels.INT8 and int8_rows.rows_op() is None):
        return False
    for pair in pairs:
        for layer in pair:
            if layer._forward_hooks or layer._forward_pre_hooks:
                return False
            for name in LINEARS:
                linear = getattr(layer, name)
                if isinstance(linear, ReducedPrecisionLinear):
                    if linear.precision != precision:
                        return False
                elif type(linear) is not nn.Linear or precision.reduced:
                    return False
    return True


def bf16_weights(pair: Tuple[LSTMPLayer, LSTMPLayer], paired: PairedWeights) -> PairedWeights:
    """bfloat16 copies of a layer pair's paired weights in the same layouts, made once per weights
    version and kept on the pair's first layer."""
    return _bf16_copies(pair, paired)[1]


def bf16_row_weights(pair: Tuple[LSTMPLayer, LSTMPLayer], paired: PairedWeights) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
    """The recurrent and projection weights of a layer pair packed for ``bf16_rows`` (the products
    of a few rows), made with ``bf16_weights``' copies; None where the compiled library is not
    available."""
    return _bf16_copies(pair, paired)[2]


def bf16_onednn_weights(pair: Tuple[LSTMPLayer, LSTMPLayer], paired: PairedWeights) -> Optional[Tuple[Tuple[torch.Tensor, torch.Tensor], ...]]:
    """Per direction, the recurrent and projection weights' bfloat16 copies prepacked for oneDNN
    (``prepacked.product``: the products of a batch's timesteps, faster than ``bmm`` on the same
    copies: bench/bench_tf_peer.py's bf16 rows); None off the CPU or without oneDNN's ops."""
    return _bf16_copies(pair, paired)[3]


def _bf16_copies(pair: Tuple[LSTMPLayer, LSTMPLayer], paired: PairedWeights) -> Tuple:
    owner = pair[0]
    key = tensors_version(*(getattr(layer, name).weight for layer in pair for name in LINEARS))
    cached = getattr(owner, "_bf16_paired", None)
    if cached is None or cached[0] != key:
        copies = tuple(w.to(torch.bfloat16) for w in paired)  # strides kept: same layouts
        on_cpu = copies[1].device.type == "cpu"  # the kernel library's ops are CPU code
        rows = (bf16_rows.pack(copies[1]), bf16_rows.pack(copies[2])) if on_cpu and bf16_rows.rows_op() is not None else None
        onednn = (
            tuple((prepacked.pack(copies[1][d].t()), prepacked.pack(copies[2][d].t())) for d in range(copies[1].shape[0]))
            if on_cpu and prepacked.available() else None
        )
        cached = (key, copies, rows, onednn)
        owner._bf16_paired = cached
    return cached


def int8_weights(pair: Tuple[LSTMPLayer, LSTMPLayer]) -> Tuple[Tuple[int8_rows.Int8Weights, Optional[torch.Tensor]], ...]:
    """Each linear map of a layer pair (in LINEARS order) as both directions' weights packed for
    ``int8_rows`` with their (2, out) biases (or None): each direction's weights quantized as its
    own int8 layer quantizes them, so the pair computes what the layers would. The recurrent weights
    are packed by unit (``int8_rows.pack_cells``, their bias in that order) where ``int8_rows.cells``
    runs them. Made once per weights version and kept on the pair's first layer."""
    owner = pair[0]
    groups = [[getattr(layer, name) for layer in pair] for name in LINEARS]
    key = tensors_version(*(t for group in groups for linear in group for t in (linear.weight, linear.bias)))
    cached = getattr(owner, "_int8_paired", None)
    if cached is None or cached[0] != key:
        packed = []
        for name, group in zip(LINEARS, groups):
            weights = torch.stack([linear.weight.detach() for linear in group])
            bias = None if group[0].bias is None else torch.stack([linear.bias.detach() for linear in group]).float()
            if name == "state_linearity" and _by_unit(pair[0], weights):
                packed.append(int8_rows.pack_cells(weights, bias))
            else:
                packed.append((int8_rows.pack(weights), bias))
        cached = (key, tuple(packed))
        owner._int8_paired = cached
    return cached[1]


def _by_unit(layer: LSTMPLayer, weights: torch.Tensor) -> bool:
    """Whether the recurrent weights are packed by unit for ``int8_rows.cells`` (the timestep's product
    and cells in one call): its op is built, on the CPU, and the cells come in whole blocks."""
    return weights.device.type == "cpu" and layer.dim % int8_rows.UNITS == 0 and int8_rows.cells_op() is not None


def forget_bf16_weights(module: nn.Module) -> None:
    """Drop the bfloat16 copies ``bf16_weights`` and the int8 packs ``int8_weights`` keep on
    ``module`` (remade at the next use)."""
    module.__dict__.pop("_bf16_paired", None)
    module.__dict__.pop("_int8_paired", None)


def _input_products(x: torch.Tensor, weights: torch.Tensor, quantized, bias: torch.Tensor,
                    out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """(2, n, in) inputs times a pair's input weights plus their (2, 1, out) bias: ``_bmm`` then the
    bias, or with ``quantized`` (the pair's ``int8_weights`` entry for them) the int8 product with the
    bias added in the kernel (after the product, as the separate add did: the same sums, one pass
    fewer over a (2, n, 4 * dim) buffer)."""
    if quantized is None:
        return _bmm(x, weights, out=out).add_(bias)
    target = out if out is not None else x.new_empty(2, x.shape[1], weights.shape[-1])
    return int8_rows.product(x, quantized[0][0], target, bias=bias[:, 0].float().contiguous())


def _bmm(a: torch.Tensor, b: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``a @ b`` batched, in ``b``'s precision (bfloat16 weights: a cast, the result back in ``a``'s)."""
    if b.dtype == a.dtype:
        return torch.bmm(a, b, out=out)
    result = torch.bmm(a.to(b.dtype), b)
    return result.to(a.dtype) if out is None else out.copy_(result)


def packed_positions(batch_sizes: Sequence[int], device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
    """The running (row, timestep) positions of a length-sorted batch, timestep after timestep.

    RETURNS (Tuple[Tensor, Tensor]): row and timestep indices, as LongTensors on ``device``.
    """
    # numpy: torch.repeat_interleave took 0.6 ms here, a twentieth of a short sentence's forward pass
    sizes = np.asarray(batch_sizes, dtype=np.int64).reshape(-1)
    starts = np.cumsum(sizes) - sizes
    times = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
    rows = np.arange(len(times), dtype=np.int64) - np.repeat(starts, sizes)
    return torch.from_numpy(rows).to(device), torch.from_numpy(times).to(device)


def gather_running(x: torch.Tensor, rows: torch.Tensor, times: torch.Tensor) -> torch.Tensor:
    """``x[rows, times]`` for (B, T, ...) ``x``: as a view or one reshape when nothing is left out."""
    batch, steps = x.shape[:2]
    if len(rows) == batch * steps:  # every position runs: time-major order is all of x
        return x.transpose(0, 1).reshape(batch * steps, *x.shape[2:])
    if x.is_contiguous():
        return x.reshape(batch * steps, *x.shape[2:]).index_select(0, rows * steps + times)
    return x[rows, times]


def _workspace(owner: nn.Module, numel: int, like: torch.Tensor, slot: str = "inputs") -> torch.Tensor:
    """A flat buffer of ``numel`` elements of ``like``'s dtype and device, reused between calls.

    The input projections of a batch are large (the full model: 128 KiB per running position, about
    215 MiB for 64 sentences of 20-30 tokens). Allocated afresh, the operating system maps and zeroes
    every page of it again at first touch, which took a third as long as the product itself.
    The largest buffer seen is kept per thread and ``slot`` while ``owner`` lives (``"inputs"``: the
    running positions' projections; ``"distinct"``: the first layer's, one row per distinct token).
    """
    spaces = getattr(_WORKSPACES, "by_owner", None)
    if spaces is None:
        spaces = _WORKSPACES.by_owner = weakref.WeakKeyDictionary()
    slots = spaces.setdefault(owner, {})
    buffer = slots.get(slot)
    if buffer is None or buffer.numel() < numel or buffer.dtype != like.dtype or buffer.device != like.device:
        slots.pop(slot, None)  # freed before the larger one is allocated
        buffer = like.new_empty(numel)
        slots[slot] = buffer
    return buffer[:numel]
