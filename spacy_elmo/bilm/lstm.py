"""LSTM with a projection (LSTMP) over length-sorted, variable-length batches.

Gate order and conventions follow TensorFlow's LSTMCell, which the published
weights use: gates are [i, j, f, o]; the forget bias of +1 is folded into the
stored bias; the cell is clipped before the tanh, then the projection is clipped.
"""
from typing import List, Optional, Sequence, Tuple

import torch
from torch import nn

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

    def forward(self, inputs: torch.Tensor, batch_sizes: Sequence[int], state: State) -> Tuple[torch.Tensor, State]:
        """Run over a batch sorted by decreasing length.

        inputs (Tensor): (B, T, input_dim), rows sorted by decreasing length.
        batch_sizes (Sequence[int]): number of rows still running at each timestep.
        state (State): initial (h, c) for all B rows.
        RETURNS (Tuple[Tensor, State]): outputs (B, T, projection_dim), zero past each row's end,
            and the final state of every row (taken at its own last timestep).
        """
        batch, steps, _ = inputs.shape
        # All timesteps' input projections in one matrix product.
        projected_inputs = self.input_linearity(inputs)
        h, c = state
        outputs: List[torch.Tensor] = []
        dim = self.dim
        for t in range(steps):
            n = batch_sizes[t]
            gates = projected_inputs[:n, t] + self.state_linearity(h[:n])
            i = torch.sigmoid(gates[:, :dim])
            j = torch.tanh(gates[:, dim : 2 * dim])
            f = torch.sigmoid(gates[:, 2 * dim : 3 * dim])
            o = torch.sigmoid(gates[:, 3 * dim :])
            c_new = f * c[:n] + i * j
            if self.cell_clip is not None:
                c_new = c_new.clamp(-self.cell_clip, self.cell_clip)
            h_new = self.projection(o * torch.tanh(c_new))
            if self.proj_clip is not None:
                h_new = h_new.clamp(-self.proj_clip, self.proj_clip)
            if n < batch:
                outputs.append(torch.nn.functional.pad(h_new, (0, 0, 0, batch - n)))
                h = torch.cat([h_new, h[n:]])
                c = torch.cat([c_new, c[n:]])
            else:
                outputs.append(h_new)
                h, c = h_new, c_new
        if outputs:
            out = torch.stack(outputs, dim=1)
        else:
            out = inputs.new_zeros(batch, 0, self.projection_dim)
        return out, (h, c)


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

    def forward(
        self, inputs: torch.Tensor, batch_sizes: Sequence[int], states: List[State]
    ) -> Tuple[List[torch.Tensor], List[State]]:
        outputs: List[torch.Tensor] = []
        final: List[State] = []
        x = inputs
        for k, layer in enumerate(self.layers):
            y, state = layer(x, batch_sizes, states[k])
            if k > 0 and self.use_skip_connections:
                y = y + x
            outputs.append(y)
            final.append(state)
            x = y
        return outputs, final
