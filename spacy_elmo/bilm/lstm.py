"""LSTM with a projection (LSTMP) over length-sorted, variable-length batches: the reference loop.

Gate order and conventions follow TensorFlow's LSTMCell, which the published
weights use: gates are [i, j, f, o]; the forget bias of +1 is folded into the
stored bias; the cell is clipped before the tanh, then the projection is clipped.

The input projections of all timesteps are one matrix product; rows that have ended drop out of
each step (the batch is sorted by length). The timesteps then run one after the other as written
in ``LSTMPLayer.steps``, with the elementwise math of ``cell_step``: this is the computation the
published weights were trained with and the one every faster path is tested against. How the
timesteps run faster (in place, both directions in lockstep, compiled, one autograd node for
training) is ``spacy_elmo.fast``'s business: the runner attached to the model (``BiLM.runner``)
runs the stacks, and hands a layer's timesteps to its own loop through ``run_steps``.
"""
from typing import Callable, List, Optional, Sequence, Tuple

import torch
from torch import nn

State = Tuple[torch.Tensor, torch.Tensor]  # (h: (B, proj), c: (B, dim))
# run_steps(layer, projected, batch_sizes, state): what ``LSTMPLayer.steps`` computes, another way
StepsRunner = Callable[["LSTMPLayer", torch.Tensor, Sequence[int], State], Tuple[torch.Tensor, State]]


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

    def forward(
        self, inputs: torch.Tensor, batch_sizes: Sequence[int], state: State, run_steps: Optional[StepsRunner] = None
    ) -> Tuple[torch.Tensor, State]:
        """Run over a batch sorted by decreasing length.

        inputs (Tensor): (B, T, input_dim), rows sorted by decreasing length.
        batch_sizes (Sequence[int]): number of rows still running at each timestep.
        state (State): initial (h, c) for all B rows.
        run_steps (Optional[StepsRunner]): runs the timesteps instead of ``steps`` (a runner of
            ``spacy_elmo.fast`` passes its own; an argument, not a setting of the layer, so that
            module hooks such as training's dropout still see every call).
        RETURNS (Tuple[Tensor, State]): outputs (B, T, projection_dim), zero past each row's end,
            and the final state of every row (taken at its own last timestep).
        """
        # Time-major: each step reads one contiguous block of input projections.
        projected = self.input_linearity(inputs.transpose(0, 1))
        if run_steps is None:
            out, final = self.steps(projected, batch_sizes, state)
        else:
            out, final = run_steps(self, projected, batch_sizes, state)
        return out.transpose(0, 1), final

    def steps(self, projected: torch.Tensor, batch_sizes: Sequence[int], state: State) -> Tuple[torch.Tensor, State]:
        """The timesteps one after the other, each a new tensor (autograd works through them).

        projected (Tensor): (T, B, 4 * dim) input projections (bias included), time-major.
        RETURNS (Tuple[Tensor, State]): outputs (T, B, projection_dim), zero past each row's end,
            and each row's final (h, c).
        """
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


def cell_step(gates: torch.Tensor, cell: torch.Tensor, dim: int, cell_clip: Optional[float]) -> State:
    """The elementwise part of an LSTMP timestep: the one place its math is written.

    From the summed pre-activations ``gates`` = [i, j, f, o] (``(..., 4 * dim)``) and the cell:
    ``c' = clip(sigmoid(f) * c + sigmoid(i) * tanh(j))`` and the hidden state before the
    projection, ``sigmoid(o) * tanh(c')``. ``f * c + i * j`` is rounded as two operations, never
    fused into one multiply-add: the in-place form in ``spacy_elmo.fast`` computes in this order
    too, and the two are held to bitwise equality.
    RETURNS (State): the hidden state before the projection, and the new cell.
    """
    i = torch.sigmoid(gates[..., :dim])
    j = torch.tanh(gates[..., dim : 2 * dim])
    f, o = torch.sigmoid(gates[..., 2 * dim :]).chunk(2, dim=-1)
    cell = clip(f * cell + i * j, cell_clip)
    return o * torch.tanh(cell), cell


def clip(x: torch.Tensor, limit: Optional[float], in_place: bool = False) -> torch.Tensor:
    """``x`` clamped to [-limit, limit] (in place if asked); unchanged when ``limit`` is None."""
    if limit is None:
        return x
    return x.clamp_(-limit, limit) if in_place else x.clamp(-limit, limit)


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
        self, inputs: torch.Tensor, batch_sizes: Sequence[int], states: List[State], run_steps: Optional[StepsRunner] = None
    ) -> Tuple[List[torch.Tensor], List[State]]:
        """Each layer in turn (``run_steps``: see ``LSTMPLayer.forward``). RETURNS every layer's
        output and final state."""
        outputs: List[torch.Tensor] = []
        final: List[State] = []
        x = inputs
        for k, layer in enumerate(self.layers):
            y, state = layer(x, batch_sizes, states[k], run_steps)
            y = self.skip(k, x, y)
            outputs.append(y)
            final.append(state)
            x = y
        return outputs, final
