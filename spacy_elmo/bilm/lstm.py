"""LSTM with a projection (LSTMP) over length-sorted, variable-length batches.

Gate order and conventions follow TensorFlow's LSTMCell, which the published
weights use: gates are [i, j, f, o]; the forget bias of +1 is folded into the
stored bias; the cell is clipped before the tanh, then the projection is clipped.

Speed (see bench/): the input projections of all timesteps are one matrix product;
rows that have ended drop out of each step (the batch is sorted by length); without
autograd the step runs in place on preallocated time-major buffers, so each timestep
is one fused recurrent product, a few in-place elementwise ops and the projection
(``run_in_place``, which also steps both directions together: see inference/bidirectional.py).
Both paths take the step's elementwise math from ``cell_step`` and are bitwise equal.
"""
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import nn

from . import lstm_grad

State = Tuple[torch.Tensor, torch.Tensor]  # (h: (B, proj), c: (B, dim))


class LSTMPLayer(nn.Module):
    """One direction, one layer.

    input_dim (int): width of the input.
    dim (int): cell size.
    projection_dim (int): output size.
    cell_clip (Optional[float]): clip value for the cell, None for no clipping.
    proj_clip (Optional[float]): clip value for the output, None for no clipping.
    """

    def __init__(
        self, input_dim: int, dim: int, projection_dim: int, cell_clip: Optional[float], proj_clip: Optional[float]
    ) -> None:
        super().__init__()
        self.dim = dim
        self.projection_dim = projection_dim
        self.cell_clip = cell_clip
        self.proj_clip = proj_clip
        self.input_linearity = nn.Linear(input_dim, 4 * dim, bias=True)
        self.state_linearity = nn.Linear(projection_dim, 4 * dim, bias=False)
        self.projection = nn.Linear(dim, projection_dim, bias=False)
        # Set by fast.optimize_for_inference (exact=False); not saved.
        self.tanh_via_sigmoid = False

    def forward(self, inputs: torch.Tensor, batch_sizes: Sequence[int], state: State) -> Tuple[torch.Tensor, State]:
        """Run over a batch sorted by decreasing length.

        inputs (Tensor): (B, T, input_dim), rows sorted by decreasing length.
        batch_sizes (Sequence[int]): number of rows still running at each timestep.
        state (State): initial (h, c) for all B rows.
        RETURNS (Tuple[Tensor, State]): outputs (B, T, projection_dim), zero past each row's end,
            and the final state of every row (taken at its own last timestep).
        """
        # Time-major: each step reads one contiguous block of input projections.
        projected = self.input_linearity(inputs.transpose(0, 1))
        if torch.is_grad_enabled() and any(t.requires_grad for t in (projected, state[0], state[1])):
            out, final = self._run_autograd(projected, batch_sizes, state)
            return out.transpose(0, 1), final
        out, finals = run_in_place([self], projected[None], batch_sizes, [state])
        return out[:, 0].transpose(0, 1), finals[0]

    def _run_autograd(
        self, projected: torch.Tensor, batch_sizes: Sequence[int], state: State
    ) -> Tuple[torch.Tensor, State]:
        weights = (self.state_linearity.weight, self.projection.weight)
        if lstm_grad.usable(projected, *state, *weights):
            return lstm_grad.run_steps(projected, state, weights, batch_sizes, self.dim, (self.cell_clip, self.proj_clip))
        return self._run_op_by_op(projected, batch_sizes, state)

    def _run_op_by_op(
        self, projected: torch.Tensor, batch_sizes: Sequence[int], state: State
    ) -> Tuple[torch.Tensor, State]:
        """The timesteps under autograd, op by op: under autocast, and the reference for ``lstm_grad``."""
        steps, batch, _ = projected.shape
        dim = self.dim
        h, c = state
        outputs: List[torch.Tensor] = []
        weight = self.state_linearity.weight.t()
        # One view per timestep: indexing projected[t] would make every step's backward allocate
        # (and add into) a gradient of the whole projected tensor.
        per_step = projected.unbind(0)
        for t in range(steps):
            n = batch_sizes[t]
            gates = torch.addmm(per_step[t][:n], h[:n], weight)
            hidden, c_new = cell_step(gates, c[:n], dim, self.cell_clip)
            h_new = clip(self.projection(hidden), self.proj_clip)
            if n < batch:
                outputs.append(nn.functional.pad(h_new, (0, 0, 0, batch - n)))
                h = torch.cat([h_new, h[n:]])
                c = torch.cat([c_new, c[n:]])
            else:
                outputs.append(h_new)
                h, c = h_new, c_new
        if outputs:
            out = torch.stack(outputs)
        else:
            out = projected.new_zeros(0, batch, self.projection_dim)
        return out, (h, c)


def run_in_place(
    layers: Sequence[LSTMPLayer],
    projected: torch.Tensor,
    batch_sizes: Sequence[int],
    states: Sequence[State],
    paired: Optional[Tuple[torch.Tensor, torch.Tensor]] = None,
    packed: bool = False,
) -> Tuple[torch.Tensor, List[State]]:
    """The timesteps of D layers of one shape (directions) over the same batch sizes, without autograd.

    layers (Sequence[LSTMPLayer]): the D layers.
    projected (Tensor): input projections: (D, T, B, 4 * dim), time-major; or, if ``packed``,
        (D, sum(batch_sizes), 4 * dim): the running rows only, timestep after timestep.
    batch_sizes (Sequence[int]): rows still running at each timestep.
    states (Sequence[State]): initial (h, c) of each layer; not modified.
    paired (Optional[Tuple[Tensor, Tensor]]): recurrent and projection weights of all D layers as
        (D, proj, 4 * dim) and (D, dim, proj), for batched products; required when D > 1.
    RETURNS (Tuple[Tensor, List[State]]): outputs (T, D, B, proj), zero past each row's end, and
        each layer's final state.
    packed (bool): ``projected`` holds the running rows only.
    """
    layer = layers[0]
    n_dir, steps, batch = projected.shape[0], len(batch_sizes), states[0][0].shape[0]
    dim = layer.dim
    h0 = torch.stack([h for h, _ in states])
    c = torch.stack([c for _, c in states])  # updated in place; a row that has ended keeps its final cell
    out = projected.new_zeros(steps, n_dir, batch, layer.projection_dim)
    gates_buffer = projected.new_empty(n_dir * batch * 4 * dim)
    hidden_buffer = projected.new_empty(n_dir * batch * dim)
    tanh_ = _tanh_via_sigmoid_ if layer.tanh_via_sigmoid else torch.Tensor.tanh_
    recurrent, project = _step_products(layer, paired, projected, n_dir * batch * 4 * dim)
    h = h0
    views: Dict[int, Tuple[torch.Tensor, torch.Tensor, InPlaceStep]] = {}  # per number of running rows: the step's buffers
    # tanh through sigmoid with the step's ops fused where the values allow (see cell_step)
    fused = layer.tanh_via_sigmoid and projected.device.type == "cpu"
    two, one = projected.new_tensor(2.0), projected.new_tensor(1.0)
    out_steps = out.unbind(0)  # views made once: indexing costs microseconds a step
    if packed:
        step_inputs = projected.split(list(batch_sizes), dim=1)
    for t in range(steps):
        n = batch_sizes[t]
        if n == 0:
            break
        if n not in views:
            g = gates_buffer[: n_dir * n * 4 * dim].view(n_dir, n, 4 * dim)
            parts = (g[..., k * dim : (k + 1) * dim] for k in range(4))
            views[n] = (g, c[:, :n], InPlaceStep(*parts, hidden_buffer[: n_dir * n * dim].view(n_dir, n, dim), two, one))
        gates, cell, buffers = views[n]
        step_input = step_inputs[t] if packed else projected[:, t, :n]
        recurrent(step_input, h if n == batch else h[:, :n], gates)
        hidden, _ = cell_step(gates, cell, dim, layer.cell_clip, tanh=tanh_, buffers=buffers, fused=fused)
        h = out_steps[t]
        h_new = h if n == batch else h[:, :n]
        project(hidden, h_new)
        clip(h_new, layer.proj_clip, in_place=True)
    finals = [(_final_hidden(out[:, d], h0[d], batch_sizes), c[d]) for d in range(n_dir)]
    return out, finals


StepProduct = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], None]


def _step_products(
    layer: LSTMPLayer,
    paired: Optional[Tuple[torch.Tensor, torch.Tensor]],
    projected: torch.Tensor,
    gates_numel: int,
) -> Tuple[StepProduct, StepProduct]:
    """The two products of an in-place timestep for these weights: ``recurrent(p, h, gates)``
    writes ``p + h @ W_state`` into ``gates``; ``project(hidden, dest)`` writes ``hidden @ W_proj``
    into ``dest``. All tensors are (D, n, width).

    paired: both directions' weights stacked (float32, or bfloat16 copies: then each product casts
    its input and adds in float32); without them one layer's own linear maps (plain, or the
    reduced-precision stand-ins of inference/quantize.py).
    """
    if paired is not None and paired[0].dtype != projected.dtype:  # bfloat16 weights: cast each step
        state_weights, projection_weights = paired
        low = projected.new_empty(gates_numel, dtype=state_weights.dtype)

        def recurrent(p: torch.Tensor, h: torch.Tensor, gates: torch.Tensor) -> None:
            product = torch.bmm(h.to(state_weights.dtype), state_weights, out=low[: gates.numel()].view(gates.shape))
            gates.copy_(product).add_(p)  # a quarter faster than one add of mixed types

        def project(hidden: torch.Tensor, dest: torch.Tensor) -> None:
            dest.copy_(torch.bmm(hidden.to(projection_weights.dtype), projection_weights))

    elif paired is not None:
        state_weights, projection_weights = paired

        def recurrent(p: torch.Tensor, h: torch.Tensor, gates: torch.Tensor) -> None:
            torch.baddbmm(p, h, state_weights, out=gates)

        def project(hidden: torch.Tensor, dest: torch.Tensor) -> None:
            if dest.is_contiguous():  # every row still running
                torch.bmm(hidden, projection_weights, out=dest)
            else:
                dest.copy_(torch.bmm(hidden, projection_weights))

    elif type(layer.state_linearity) is nn.Linear and layer.state_linearity.weight.dtype == projected.dtype:

        def recurrent(p: torch.Tensor, h: torch.Tensor, gates: torch.Tensor) -> None:
            torch.addmm(p[0], h[0], layer.state_linearity.weight.t(), out=gates[0])

        def project(hidden: torch.Tensor, dest: torch.Tensor) -> None:
            torch.mm(hidden[0], layer.projection.weight.t(), out=dest[0])

    else:  # reduced-precision stand-ins for the linear layers (see inference/quantize.py)

        def recurrent(p: torch.Tensor, h: torch.Tensor, gates: torch.Tensor) -> None:
            torch.add(layer.state_linearity(h[0]), p[0], out=gates[0])

        def project(hidden: torch.Tensor, dest: torch.Tensor) -> None:
            dest[0].copy_(layer.projection(hidden[0]))

    return recurrent, project


class InPlaceStep(NamedTuple):
    """What an in-place timestep over ``n`` running rows works in, besides its gates and cells:
    views made once per ``n``, since making a view costs microseconds a step."""

    i: torch.Tensor  # the four gates' parts of the (D, n, 4 * dim) gates buffer
    j: torch.Tensor
    f: torch.Tensor
    o: torch.Tensor
    product: torch.Tensor  # (D, n, dim): receives i * j, then the hidden state
    two: torch.Tensor  # the constants of tanh through sigmoid, as tensors: a Python float costs
    one: torch.Tensor  # each op a conversion (5.7 us against 2.5 per op)


def cell_step(
    gates: torch.Tensor,
    cell: torch.Tensor,
    dim: int,
    cell_clip: Optional[float],
    *,
    tanh: Callable[[torch.Tensor], torch.Tensor] = torch.tanh,
    buffers: Optional[InPlaceStep] = None,
    fused: bool = False,
) -> State:
    """The elementwise part of an LSTMP timestep: the one place its math is written.

    From the summed pre-activations ``gates`` = [i, j, f, o] (``(..., 4 * dim)``) and the cell:
    ``c' = clip(sigmoid(f) * c + sigmoid(i) * tanh(j))`` and the hidden state before the
    projection, ``sigmoid(o) * tanh(c')``.

    Without ``buffers`` every result is a new tensor (the autograd path). With them the step runs
    in place for inference (``buffers`` holds views of ``gates``): the gates and the cell
    are overwritten, ``tanh`` must work in place, and the hidden state is written into
    ``buffers.product``. Both compute in the same order, so their results are bitwise equal
    (f * c + i * j is rounded as two operations, never fused into one multiply-add).
    fused (bool): in place on CPU, tanh taken as 2 * sigmoid(2x) - 1 (within 2.5e-7) with one
        sigmoid over all four gates.
    RETURNS (State): the hidden state before the projection, and the new cell.
    """
    if buffers is None:
        i = torch.sigmoid(gates[..., :dim])
        j = tanh(gates[..., dim : 2 * dim])
        f, o = torch.sigmoid(gates[..., 2 * dim :]).chunk(2, dim=-1)
        cell = clip(f * cell + i * j, cell_clip)
        return o * tanh(cell), cell
    b = buffers
    if fused:
        b.j.mul_(b.two)
        gates.sigmoid_()
        b.j.mul_(b.two).sub_(b.one)
    else:
        b.i.sigmoid_()
        tanh(b.j)
        gates[..., 2 * dim :].sigmoid_()
    torch.mul(b.i, b.j, out=b.product)
    clip(cell.mul_(b.f).add_(b.product), cell_clip, in_place=True)
    if fused:
        hidden = torch.mul(cell, b.two, out=b.product).sigmoid_().mul_(b.two).sub_(b.one)
    else:
        hidden = tanh(b.product.copy_(cell))
    return hidden.mul_(b.o), cell


def clip(x: torch.Tensor, limit: Optional[float], in_place: bool = False) -> torch.Tensor:
    """``x`` clamped to [-limit, limit] (in place if asked); unchanged when ``limit`` is None."""
    if limit is None:
        return x
    return x.clamp_(-limit, limit) if in_place else x.clamp(-limit, limit)


def _tanh_via_sigmoid_(x: torch.Tensor) -> torch.Tensor:
    """tanh in place; on CPU as 2 * sigmoid(2x) - 1 (within 2.5e-7).

    torch hands tanh to MKL's vector math, threaded from a few thousand elements on: on an idle
    machine 2.7x slower than this at the sizes of a batch's step (1 ms against 0.38 ms for
    2 x 64 x 4096), and on a busy one each call waits milliseconds for a descheduled thread,
    twice per layer and timestep. sigmoid runs in torch's own vectorized loops.
    """
    if x.device.type != "cpu":
        return x.tanh_()
    return x.mul_(2.0).sigmoid_().mul_(2.0).sub_(1.0)


def _final_hidden(out: torch.Tensor, h0: torch.Tensor, batch_sizes: Sequence[int]) -> torch.Tensor:
    """Each row's output at its own last timestep (time-major ``out``), or its initial h if it never ran."""
    batch = h0.shape[0]
    steps_run = torch.zeros(batch, dtype=torch.long)
    for n in batch_sizes:
        steps_run[:n] += 1
    final = h0.clone()
    rows = torch.nonzero(steps_run > 0).flatten()
    if len(rows):
        last = (steps_run[rows] - 1).to(out.device)
        rows = rows.to(out.device)
        final[rows] = out[last, rows]
    return final


class LSTMPStack(nn.Module):
    """L LSTMP layers of one direction, with optional residual connections between layers."""

    def __init__(
        self,
        input_dim: int,
        dim: int,
        projection_dim: int,
        n_layers: int,
        cell_clip: Optional[float],
        proj_clip: Optional[float],
        use_skip_connections: bool,
    ) -> None:
        super().__init__()
        self.use_skip_connections = use_skip_connections
        self.layers = nn.ModuleList(
            [
                LSTMPLayer(input_dim if k == 0 else projection_dim, dim, projection_dim, cell_clip, proj_clip)
                for k in range(n_layers)
            ]
        )

    def skip(self, k: int, layer_input: torch.Tensor, layer_output: torch.Tensor) -> torch.Tensor:
        """Layer ``k``'s output as the next layer (and the caller) sees it: plus its input above
        the first layer when the stack has skip connections. Every layer loop goes through here."""
        if k > 0 and self.use_skip_connections:
            return layer_output + layer_input
        return layer_output

    def forward(
        self, inputs: torch.Tensor, batch_sizes: Sequence[int], states: List[State]
    ) -> Tuple[List[torch.Tensor], List[State]]:
        outputs: List[torch.Tensor] = []
        final: List[State] = []
        x = inputs
        for k, layer in enumerate(self.layers):
            y, state = layer(x, batch_sizes, states[k])
            y = self.skip(k, x, y)
            outputs.append(y)
            final.append(state)
            x = y
        return outputs, final
