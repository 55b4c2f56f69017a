"""The LSTMP timestep loop for training: one autograd node per layer, with a hand-written backward.

Run op by op under autograd, a layer's loop leaves a graph of about twenty nodes a timestep, and
its backward spends as long on bookkeeping as on arithmetic: slicing the running rows allocates
and zero-fills a full-size gradient per step, ``cat``/``pad`` copy the states, and each step's
weight gradients are small products of their own. ``LSTMPSteps`` runs the same forward without a
graph, saves what the backward needs in time-major buffers, and walks back through the steps
with a few products and elementwise ops each; the weight gradients are then one product each
over all timesteps. In float64, and in float32 with its cells in torch operations (below), the
forward computes exactly what the reference loop (``LSTMPLayer.steps``) computes, in the same
order; gradients agree with autograd's to rounding (``tests/fast/test_train_step.py``).

Under CPU autocast to bfloat16 (``[training] autocast = "bf16"``) the same node runs its matrix
products in bfloat16 (``low``): the operands are rounded to bfloat16 and oneDNN sums them in
float32, as autocast's own products do, while the gates, cells, clips and the running state stay
float32. The op-by-op loop under autocast would run the same products but pay its per-op
bookkeeping on top (docs/pretraining.md has the numbers). Autocast elsewhere (float16, or on a GPU)
still takes the reference loop. The backward is not itself differentiable: a second derivative
raises; within ``dispatch.op_by_op()`` the reference loop gives one.

Each timestep's elementwise work, forward (the gates' activations, the cell, its clip, the tanh and
the hidden state, rounded to bfloat16 where the products read it so) and backward (the clip's
mask, the four gates' gradients through their activations, the cell's), runs as one loop a step
in the kernel library (``train_cells`` and ``train_cells_backward``, ``csrc/cell_math.cpp``) for
float32 weights on the CPU, instead of about ten torch operations each way (adding the step's input
projections to its recurrent product as they read it, where ``addmm`` copied them into the gates
first). Its exp and tanh are
within about 1 ulp of torch's, so float32 outputs and gradients agree with the op-by-op loop to
rounding; float64 (the tests' exact comparisons), other devices, or no kernel library take the
same arithmetic in torch operations (``torch_cells()`` forces that: the benchmark's A/B).
"""
from typing import Any, Optional, Sequence, Tuple

import torch
from torch.autograd.function import once_differentiable

from ..bilm.lstm import State
from . import kernel_library
from .switches import ThreadSwitch

# autocast dtypes whose products the node runs itself, per device type
LOW_PRECISION = {"cpu": (torch.bfloat16,)}


_TORCH_CELLS = ThreadSwitch()


def torch_cells():
    """Within this block (this thread), the node's elementwise work runs in torch operations, as
    without the kernel library."""
    return _TORCH_CELLS.on()


def cell_kernels(device_type: str, dtype: torch.dtype) -> Optional[Any]:
    """The kernel library's ops where they run this layer's elementwise work (float32 on the CPU,
    the library available, not within ``torch_cells``), else None."""
    if device_type != "cpu" or dtype != torch.float32 or _TORCH_CELLS.active:
        return None
    ops = kernel_library.library()
    return ops if ops is not None and hasattr(ops, "train_cells") else None


def low_precision(device_type: str) -> Optional[torch.dtype]:
    """The dtype autocast runs products in on ``device_type`` now, or None where it is off."""
    if not torch.is_autocast_enabled(device_type):
        return None
    return torch.get_autocast_dtype(device_type)


def usable(projected: torch.Tensor, *weights: torch.Tensor) -> bool:
    """Whether ``LSTMPSteps`` can run this layer: float32/float64 weights and states, without
    autocast or under CPU autocast to bfloat16 (then ``projected`` may be bfloat16 too)."""
    device = projected.device.type
    low = low_precision(device)
    if low is not None:
        return (low in LOW_PRECISION.get(device, ()) and projected.dtype in (torch.float32, low)
                and all(w.dtype == torch.float32 for w in weights))
    return projected.dtype in (torch.float32, torch.float64) and all(w.dtype == projected.dtype for w in weights)


def run_steps(
    projected: torch.Tensor,
    state: State,
    weights: Tuple[torch.Tensor, torch.Tensor],
    batch_sizes: Sequence[int],
    dim: int,
    clips: Tuple[Optional[float], Optional[float]],
) -> Tuple[torch.Tensor, State]:
    """The layer's timesteps as one autograd node.

    projected (Tensor): (T, B, 4 * dim) input projections (bias included), time-major, rows
        sorted by decreasing length.
    state (State): initial (h (B, P), c (B, dim)).
    weights: the recurrent weight (4 * dim, P) and the projection weight (P, dim), as stored.
    batch_sizes (Sequence[int]): rows running at each timestep (non-increasing).
    clips: (cell_clip, proj_clip), None for no clipping.
    RETURNS (Tuple[Tensor, State]): outputs (T, B, P), zero past each row's end, and each row's
        final (h, c); in the weights' dtype.
    """
    sizes = tuple(int(n) for n in batch_sizes)
    low = low_precision(projected.device.type)
    with torch.autocast(projected.device.type, enabled=False):  # the node sets each product's dtype itself
        out, h, c = LSTMPSteps.apply(projected, state[0], state[1], weights[0], weights[1], sizes, dim, clips, low)
    return out, (h, c)


class LSTMPSteps(torch.autograd.Function):
    """Forward: the op-by-op loop's arithmetic without a graph. Backward: ``_backward``."""

    @staticmethod
    def forward(ctx, projected, h0, c0, w_state, w_proj, sizes, dim, clips, low):  # type: ignore[override]
        cell_clip, proj_clip = clips
        steps, batch = projected.shape[:2]
        width = w_proj.shape[0]
        dtype = w_state.dtype
        store = low or dtype  # what the weight gradients' operands are kept in
        acts = projected.new_empty(steps, batch, 4 * dim, dtype=dtype)  # sigmoid(i), tanh(j), sigmoid(f), sigmoid(o)
        cells = projected.new_empty(steps, batch, dim, dtype=dtype)  # each step's cell before its clip
        tanh_cells = projected.new_empty(steps, batch, dim, dtype=dtype)
        # Rows past their end stay zero here: the weight gradients are products over all rows.
        hidden = _zero_past_ends(projected, (steps, batch, dim), store, sizes)
        raw_out = projected.new_empty(steps, batch, width, dtype=dtype)  # before the projection clip
        out = _zero_past_ends(projected, (steps, batch, width), dtype, sizes)
        h, c = h0.to(dtype, copy=True), c0.to(dtype, copy=True)
        recurrent = w_state.t() if low is None else w_state.t().to(low)
        projection = w_proj.t() if low is None else w_proj.t().to(low)
        kernels = cell_kernels(projected.device.type, dtype)
        fused_sum = projected.is_contiguous()  # float32, or bfloat16 from an input projection under autocast
        for t, n in enumerate(sizes):
            if n == 0:
                break
            # the running state is a buffer of its own, not a view of ``out``: MKL's sums can
            # depend on where an operand starts in memory, and the reference's state is new each step
            first = product = None
            if low is None and kernels is not None and fused_sum:  # the kernels add the input products
                gates, first = torch.mm(h[:n], recurrent, out=acts[t, :n]), projected[t, :n]
            elif low is None:
                gates = torch.addmm(projected[t, :n], h[:n], recurrent, out=acts[t, :n])
            else:
                gates, product = acts[t, :n], torch.mm(h[:n].to(low), recurrent)
                if kernels is not None and fused_sum:
                    first = projected[t, :n]  # the kernels add the product as they read it
                else:
                    gates.copy_(projected[t, :n]).add_(product)
                    product = None
            if kernels is not None:
                kernels.train_cells(gates, first, product, c[:n], cells[t, :n], tanh_cells[t, :n], hidden[t, :n], cell_clip)
            else:
                _cells_forward(gates, c[:n], cells[t, :n], tanh_cells[t, :n], hidden[t, :n], cell_clip)
            if low is None:
                torch.mm(hidden[t, :n], projection, out=raw_out[t, :n])
            else:
                raw_out[t, :n] = torch.mm(hidden[t, :n], projection)
            if proj_clip is None:
                out[t, :n] = raw_out[t, :n]
            else:
                torch.clamp(raw_out[t, :n], -proj_clip, proj_clip, out=out[t, :n])
            h[:n] = out[t, :n]
        ctx.save_for_backward(acts, cells, tanh_cells, hidden, raw_out, out, h0, c0, w_state, w_proj)
        ctx.sizes, ctx.dim, ctx.clips, ctx.low, ctx.projected_dtype = sizes, dim, clips, low, projected.dtype
        return out, h, c

    @staticmethod
    @once_differentiable
    def backward(ctx, d_out, d_h, d_c):  # type: ignore[override]
        with torch.autocast(d_out.device.type, enabled=False):
            return _backward(ctx, d_out, d_h, d_c)


def _backward(ctx, d_out, d_h, d_c):
    """Walk back through the steps, each its two products and its elementwise ops on rows still in
    cache (a pass over all steps at once would read them from memory again); then the weight
    gradients, one product each over all steps."""
    acts, cells, tanh_cells, hidden, raw_out, out, h0, c0, w_state, w_proj = ctx.saved_tensors
    sizes, low, (cell_clip, proj_clip) = ctx.sizes, ctx.low, ctx.clips
    steps, batch = acts.shape[:2]
    dtype = acts.dtype
    store = hidden.dtype
    # Gradients with respect to each row's running state; a row that has ended holds the
    # gradient of its final state until the walk back reaches its last step.
    dh, dc = d_h.to(dtype, copy=True), d_c.to(dtype, copy=True)
    d_out = d_out.to(dtype)
    d_gates = _zero_past_ends(acts, tuple(acts.shape), store, sizes)  # = the gradient of ``projected``
    d_raw_out = _zero_past_ends(acts, tuple(raw_out.shape), store, sizes)
    if low is None:
        gate_step, raw_step = d_gates, d_raw_out  # each step's rows are worked on in place
        weights = (w_state, w_proj)
    else:  # each step works in float32 here; the products read the rounded copies
        gate_step, raw_step = acts.new_empty(batch, acts.shape[2]), acts.new_empty(batch, raw_out.shape[2])
        weights = (w_state.to(low), w_proj.to(low))
    kernels = cell_kernels(acts.device.type, dtype)
    first_cell = c0.to(dtype).contiguous()
    for t in reversed(range(steps)):
        n = sizes[t]
        if n == 0:
            continue
        d_raw = d_raw_out[t, :n] if low is None else raw_step[:n]
        torch.add(dh[:n], d_out[t, :n], out=d_raw)
        if proj_clip is not None:
            d_raw.mul_(raw_out[t, :n].abs() <= proj_clip)
        if low is not None:
            d_raw_out[t, :n] = d_raw
        d_hidden = torch.mm(d_raw_out[t, :n], weights[1])
        if kernels is not None:  # they read a bfloat16 d_hidden and write bfloat16 gradients themselves
            previous = first_cell[:n] if t == 0 else cells[t - 1, :n]
            kernels.train_cells_backward(acts[t, :n], cells[t, :n], tanh_cells[t, :n], previous, t > 0,
                                         d_hidden, dc[:n], d_gates[t, :n], cell_clip)
        else:
            d_gate = d_gates[t, :n] if low is None else gate_step[:n]
            previous_cell = first_cell[:n] if t == 0 else _clipped(cells[t - 1, :n], cell_clip)
            _backward_step((acts[t, :n], cells[t, :n], tanh_cells[t, :n]), previous_cell, d_hidden, dc[:n], d_gate,
                           cell_clip)
            if low is not None:
                d_gates[t, :n] = d_gate
        if low is None:
            torch.mm(d_gates[t, :n], weights[0], out=dh[:n])
        else:
            dh[:n] = torch.mm(d_gates[t, :n], weights[0])
    # each step's input state: h0, then the step before's output (rows past a step's end meet
    # that step's zero gradient rows)
    h_in = torch.cat([h0[None].to(store), out[:-1].to(store)])[:steps]
    flat_gates = d_gates.view(-1, d_gates.shape[2])
    d_w_state = (flat_gates.t() @ h_in.reshape(-1, h_in.shape[2])).to(dtype)
    d_w_proj = (d_raw_out.view(-1, d_raw_out.shape[2]).t() @ hidden.view(-1, hidden.shape[2])).to(dtype)
    return d_gates.to(ctx.projected_dtype), dh, dc, d_w_state, d_w_proj, None, None, None, None


def _cells_forward(gates, cell, cell_raw, tanh_cell, hidden, cell_clip) -> None:
    """One timestep's elementwise forward for its ``n`` running rows, in place, in torch operations
    (``train_cells`` of the kernel library does the same in one loop).

    gates (n, 4 * dim): in, before their activations; out, sigmoid(i), tanh(j), sigmoid(f), sigmoid(o).
    cell (n, dim): in, the running (clipped) cell; out, the new one. cell_raw (n, dim): out, the new
    cell before its clip. tanh_cell (n, dim): out. hidden (n, dim): out, o * tanh_cell.
    """
    dim = cell.shape[-1]
    i, j, f, o = gates.chunk(4, dim=-1)
    i.sigmoid_()
    j.tanh_()
    gates[:, 2 * dim :].sigmoid_()
    new_cell = torch.mul(f, cell, out=cell_raw).add_(i * j)
    if cell_clip is None:
        cell[:] = new_cell
    else:
        torch.clamp(new_cell, -cell_clip, cell_clip, out=cell)
    torch.mul(o, torch.tanh(cell, out=tanh_cell), out=hidden)


def _backward_step(saved, previous_cell, d_hidden, dc, d_gates, cell_clip) -> None:
    """One timestep's backward for its ``n`` running rows, in place.

    saved: the step's activations (n, 4 * dim), its cell before the clip and the tanh of its clipped cell (n, dim).
    d_hidden (n, dim): the gradient of the step's hidden state (before the projection).
    dc (n, dim): in, the gradient of the step's clipped cell; out, of the cell it started from.
    d_gates (n, 4 * dim): out, the gradient of the gates before their activations.
    """
    acts, cell, tanh_cell = saved
    dim = cell.shape[-1]
    i, j, f, o = acts.chunk(4, dim=-1)
    d_i, d_j, d_f, d_o = d_gates.chunk(4, dim=-1)
    torch.mul(d_hidden, tanh_cell, out=d_o)
    dc.addcmul_(d_hidden * o, 1 - tanh_cell * tanh_cell)
    if cell_clip is not None:
        dc.mul_(cell.abs() <= cell_clip)
    torch.mul(dc, j, out=d_i)
    torch.mul(dc, i, out=d_j)
    torch.mul(dc, previous_cell, out=d_f)
    # each gate's slope through its activation, all four in a few ops: sigmoid's a - a^2, then tanh's 1 - a^2
    slope = acts * acts
    torch.sub(acts, slope, out=slope)
    torch.mul(j, j, out=slope[:, dim : 2 * dim]).neg_().add_(1)
    d_gates.mul_(slope)
    dc.mul_(f)


def _zero_past_ends(like: torch.Tensor, shape: Tuple[int, ...], dtype: torch.dtype, sizes: Sequence[int]) -> torch.Tensor:
    """A new (T, B, ...) tensor whose rows past each timestep's running rows are zero (the rest is
    left to be written): cheaper than zeroing it all, since batches are bucketed by length."""
    buffer = like.new_empty(shape, dtype=dtype)
    batch = shape[1]
    for t in range(shape[0]):
        n = sizes[t] if t < len(sizes) else 0
        if n < batch:
            buffer[t, n:].zero_()
    return buffer


def _clipped(cell: torch.Tensor, limit: Optional[float]) -> torch.Tensor:
    return cell if limit is None else cell.clamp(-limit, limit)
