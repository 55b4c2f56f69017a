"""The LSTMP timestep loop for training: one autograd node per layer, with a hand-written backward.

Run op by op under autograd, a layer's loop leaves a graph of about twenty nodes a timestep, and
its backward spends as long on bookkeeping as on arithmetic: slicing the running rows allocates
and zero-fills a full-size gradient per step, ``cat``/``pad`` copy the states, and each step's
weight gradients are small products of their own. ``LSTMPSteps`` runs the same forward without a
graph, saves what the backward needs in time-major buffers, and walks back through the steps
with a few products and elementwise ops each; the weight gradients are then one product each
over all timesteps. The forward computes exactly what the reference loop (``LSTMPLayer.steps``) computes,
in the same order; gradients agree with autograd's to rounding (``tests/fast/test_train_step.py``).

Not used under autocast (the op-by-op loop then runs each product in the autocast dtype). The
backward is not itself differentiable: a second derivative raises; within ``dispatch.op_by_op()``
the reference loop gives one.
"""
from typing import Optional, Sequence, Tuple

import torch
from torch.autograd.function import once_differentiable

from ..bilm.lstm import State


def usable(projected: torch.Tensor, *weights: torch.Tensor) -> bool:
    """Whether ``LSTMPSteps`` can run this layer: float32/float64 throughout, no autocast."""
    if torch.is_autocast_enabled(projected.device.type):
        return False
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
        final (h, c).
    """
    sizes = tuple(int(n) for n in batch_sizes)
    out, h, c = LSTMPSteps.apply(projected, state[0], state[1], weights[0], weights[1], sizes, dim, clips)
    return out, (h, c)


class LSTMPSteps(torch.autograd.Function):
    """Forward: the op-by-op loop's arithmetic without a graph. Backward: see ``_backward_step``."""

    @staticmethod
    def forward(ctx, projected, h0, c0, w_state, w_proj, sizes, dim, clips):  # type: ignore[override]
        cell_clip, proj_clip = clips
        steps, batch = projected.shape[:2]
        width = w_proj.shape[0]
        acts = projected.new_empty(steps, batch, 4 * dim)  # sigmoid(i), tanh(j), sigmoid(f), sigmoid(o)
        cells = projected.new_empty(steps, batch, dim)  # each step's cell before its clip
        tanh_cells = projected.new_empty(steps, batch, dim)
        # Rows past their end stay zero here: the weight gradients are products over all rows.
        hidden = projected.new_zeros(steps, batch, dim)
        h_in = projected.new_zeros(steps, batch, width)
        raw_out = projected.new_empty(steps, batch, width)  # before the projection clip
        out = projected.new_zeros(steps, batch, width)
        h, c = h0.clone(), c0.clone()
        recurrent = w_state.t()
        for t, n in enumerate(sizes):
            if n == 0:
                break
            h_in[t, :n] = h[:n]
            gates = torch.addmm(projected[t, :n], h[:n], recurrent, out=acts[t, :n])
            i, j, f, o = gates.chunk(4, dim=-1)
            i.sigmoid_()
            j.tanh_()
            gates[:, 2 * dim :].sigmoid_()
            new_cell = torch.mul(f, c[:n], out=cells[t, :n]).add_(i * j)
            c[:n] = new_cell if cell_clip is None else new_cell.clamp(-cell_clip, cell_clip)
            torch.mul(o, torch.tanh(c[:n], out=tanh_cells[t, :n]), out=hidden[t, :n])
            torch.mm(hidden[t, :n], w_proj.t(), out=raw_out[t, :n])
            out[t, :n] = raw_out[t, :n] if proj_clip is None else raw_out[t, :n].clamp(-proj_clip, proj_clip)
            h[:n] = out[t, :n]
        ctx.save_for_backward(acts, cells, tanh_cells, hidden, h_in, raw_out, c0, w_state, w_proj)
        ctx.sizes, ctx.dim, ctx.clips = sizes, dim, clips
        return out, h, c

    @staticmethod
    @once_differentiable
    def backward(ctx, d_out, d_h, d_c):  # type: ignore[override]
        acts, cells, tanh_cells, hidden, h_in, raw_out, c0, w_state, w_proj = ctx.saved_tensors
        steps, batch = acts.shape[:2]
        # Gradients with respect to each row's running state; a row that has ended holds the
        # gradient of its final state until the walk back reaches its last step.
        dh, dc = d_h.clone(), d_c.clone()
        d_gates = acts.new_zeros(steps, batch, acts.shape[2])  # = the gradient of ``projected``
        d_raw_out = acts.new_zeros(steps, batch, w_proj.shape[0])
        for t in reversed(range(steps)):
            n = ctx.sizes[t]
            if n == 0:
                continue
            saved = (acts[t, :n], cells[t, :n], tanh_cells[t, :n], raw_out[t, :n])
            previous_cell = c0[:n] if t == 0 else _clipped(cells[t - 1, :n], ctx.clips[0])
            torch.add(dh[:n], d_out[t, :n], out=d_raw_out[t, :n])
            _backward_step(saved, previous_cell, (w_state, w_proj), d_raw_out[t, :n], dc[:n], d_gates[t, :n], ctx.clips)
            torch.mm(d_gates[t, :n], w_state, out=dh[:n])
        flat_gates = d_gates.view(-1, d_gates.shape[2])
        d_w_state = flat_gates.t() @ h_in.view(-1, h_in.shape[2])
        d_w_proj = d_raw_out.view(-1, d_raw_out.shape[2]).t() @ hidden.view(-1, hidden.shape[2])
        return d_gates, dh, dc, d_w_state, d_w_proj, None, None, None


def _backward_step(saved, previous_cell, weights, d_raw_out, dc, d_gates, clips) -> None:
    """One timestep's backward for its ``n`` running rows, in place.

    d_raw_out (n, P): in, the gradient of the step's clipped output; out, of the output before
        its clip (what the projection weight's gradient needs).
    dc (n, dim): in, the gradient of the step's clipped cell; out, of the cell it started from.
    d_gates (n, 4 * dim): out, the gradient of the gates before their activations.
    """
    (acts, cell, tanh_cell, raw_out), (cell_clip, proj_clip) = saved, clips
    if proj_clip is not None:
        d_raw_out.mul_(raw_out.abs() <= proj_clip)
    d_hidden = d_raw_out @ weights[1]
    i, j, f, o = acts.chunk(4, dim=-1)
    d_i, d_j, d_f, d_o = d_gates.chunk(4, dim=-1)
    torch.mul(d_hidden, tanh_cell, out=d_o).mul_(o * (1 - o))
    dc.addcmul_(d_hidden * o, 1 - tanh_cell * tanh_cell)
    if cell_clip is not None:
        dc.mul_(cell.abs() <= cell_clip)
    torch.mul(dc, j, out=d_i).mul_(i * (1 - i))
    torch.mul(dc, i, out=d_j).mul_(1 - j * j)
    torch.mul(dc, previous_cell, out=d_f).mul_(f * (1 - f))
    dc.mul_(f)


def _clipped(cell: torch.Tensor, limit: Optional[float]) -> torch.Tensor:
    return cell if limit is None else cell.clamp(-limit, limit)
