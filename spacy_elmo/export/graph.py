"""The reference biLM as one static graph: character ids and lengths in, every layer out.

``bilm.model.BiLM.forward`` decides things in Python from the batch's values: it encodes each
distinct token once (``numpy.unique``), sorts the rows by length and lets rows drop out of the
timestep loop as they end. A runtime that replays a recorded graph cannot follow those decisions,
so ``ExportGraph`` computes the same layers with shapes that depend only on the input's shape:

- every token position is encoded by the char-CNN (convolutions over the full token width; the
  reference's savings change which windows are computed, never the maximum they pool);
- both stacks run all B rows for all T timesteps; a row's outputs past its length are multiplied
  by zero, and since nothing after a row's end is ever read, its state there needs no freezing;
- the backward stack reads each row reversed within its own length (a gather with an index made
  from ``lengths``), as the reference does.

The weights are the ``BiLM``'s own modules (no copy), and the math of a timestep is
``bilm.lstm.cell_step`` written again in TorchScript-compilable form. The timestep loop is a
``torch.jit.script`` loop, so one exported graph serves every batch size and length.

The sigmoids and tanhs are ``Activations``: torch's own in a TorchScript file, and for ONNX the
forms of ``OnnxRuntimeActivations``, which ONNX Runtime computes as precisely as torch does.
"""
from typing import List, Optional

import torch
from torch import nn

from ..bilm import BiLM
from ..fast import detach


class Activations(nn.Module):
    """The graph's sigmoid and tanh as torch computes them: the reference's ops (the TorchScript file)."""

    def sigmoid(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(x)

    def tanh(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x)


class OnnxRuntimeActivations(Activations):
    """The graph's sigmoid and tanh in forms that ONNX Runtime's CPU provider computes precisely.

    Its float32 ``Sigmoid`` and ``Tanh`` kernels are fast approximations (MLAS's), about 2 and 10
    times as far from float64 as torch's ops, at every graph optimization level. An LSTM carries
    each step's error in its cell and hidden state, so on a deep model it grows with the sentence:
    past the 1e-5 contract at 200 tokens (``tests/export/test_graph.py``). Its ``Exp`` and its
    float64 ``Tanh`` are precise: sigmoid is written as ``1 / (1 + exp(-x))``, torch's own formula
    for float32 sigmoid, and tanh is computed in float64 and rounded once; together they cost about
    5% of ONNX Runtime's time on the shipped biLM. docs/export.md gives the measured errors and cost
    (``lab/reliability/export_precision.py``).
    """

    def sigmoid(self, x: torch.Tensor) -> torch.Tensor:
        return 1.0 / (1.0 + torch.exp(-x))

    def tanh(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x.double()).to(x.dtype)


def _clip_value(limit: Optional[float]) -> float:
    """A clip of None as +inf: clamping to [-inf, inf] leaves every finite value unchanged."""
    return float("inf") if limit is None else float(limit)


class ExportStack(nn.Module):
    """One direction's LSTMP layers (``bilm.lstm.LSTMPStack``'s modules), over a masked batch."""

    def __init__(
        self,
        stack: nn.Module,
        dim: int,
        cell_clip: Optional[float],
        proj_clip: Optional[float],
        activations: Activations,
    ) -> None:
        super().__init__()
        self.activations = activations
        self.input_linearity = nn.ModuleList([layer.input_linearity for layer in stack.layers])
        self.state_linearity = nn.ModuleList([layer.state_linearity for layer in stack.layers])
        self.projection = nn.ModuleList([layer.projection for layer in stack.layers])
        self.dim = dim
        self.projection_dim = stack.layers[0].projection_dim
        self.cell_clip = _clip_value(cell_clip)
        self.proj_clip = _clip_value(proj_clip)
        self.skip = bool(stack.use_skip_connections)

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor) -> List[torch.Tensor]:
        """inputs (Tensor): (B, T, width), zero at padding. mask (Tensor): (B, T) 1.0 / 0.0.
        RETURNS (List[Tensor]): each layer's output (B, T, projection_dim), zero at padding."""
        outputs: List[torch.Tensor] = []
        x = inputs
        k = 0
        for input_linearity, state_linearity, projection in zip(
            self.input_linearity, self.state_linearity, self.projection
        ):
            y = self._layer(input_linearity(x), state_linearity.weight, projection.weight, mask)
            if k > 0 and self.skip:
                y = y + x
            outputs.append(y)
            x = y
            k += 1
        return outputs

    def _layer(
        self, projected: torch.Tensor, state_weight: torch.Tensor, projection_weight: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        batch = projected.size(0)
        steps = projected.size(1)
        dim = self.dim
        h = projected.new_zeros(batch, self.projection_dim)
        c = projected.new_zeros(batch, dim)
        state_t = state_weight.t()
        projection_t = projection_weight.t()
        steps_out: List[torch.Tensor] = []
        for t in range(steps):
            gates = projected[:, t] + torch.mm(h, state_t)
            i = self.activations.sigmoid(gates[:, :dim])
            j = self.activations.tanh(gates[:, dim : 2 * dim])
            f = self.activations.sigmoid(gates[:, 2 * dim : 3 * dim])
            o = self.activations.sigmoid(gates[:, 3 * dim :])
            c = torch.clamp(f * c + i * j, -self.cell_clip, self.cell_clip)
            h = torch.clamp(torch.mm(o * self.activations.tanh(c), projection_t), -self.proj_clip, self.proj_clip)
            steps_out.append(h * mask[:, t : t + 1])
        if len(steps_out) == 0:
            return projected.new_zeros(batch, 0, self.projection_dim)
        return torch.stack(steps_out, dim=1)


class ExportEncoder(nn.Module):
    """The char-CNN token encoder (``bilm.token_encoder.CharCNNEncoder``'s modules) over every position."""

    def __init__(self, encoder: nn.Module, activations: Activations) -> None:
        super().__init__()
        config = encoder.config
        self.activations = activations
        self.char_embedding = encoder.char_embedding
        self.convolutions = encoder.convolutions
        self.transform = encoder.highway.transform
        self.carry = encoder.highway.carry
        self.projection = encoder.projection
        self.first_char = int(encoder.first_char)
        self.relu = config.activation == "relu"
        self.has_words = encoder.word_embedding is not None
        # a module attribute must exist for TorchScript; a 1x1 stand-in when the model has no words
        self.word_embedding = encoder.word_embedding if self.has_words else nn.Embedding(1, 1)

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        """rows (LongTensor): (N, token_width). RETURNS (Tensor): (N, projection_dim)."""
        embedded = self.char_embedding(rows[:, self.first_char :]).transpose(1, 2)
        pooled: List[torch.Tensor] = []
        for conv in self.convolutions:
            value = torch.amax(conv(embedded), dim=-1)
            pooled.append(torch.relu(value) if self.relu else self.activations.tanh(value))
        x = torch.cat(pooled, dim=-1)
        for transform, carry in zip(self.transform, self.carry):
            gate = self.activations.sigmoid(carry(x))
            x = gate * torch.relu(transform(x)) + (1.0 - gate) * x
        if self.has_words:
            x = torch.cat([self.word_embedding(rows[:, 0]), x], dim=-1)
        return self.projection(x)


class ExportGraph(nn.Module):
    """``BiLM.forward``'s layers as one graph of fixed structure.

    bilm (BiLM): the model; any attached runner is detached (the export is the reference path).
    for_onnx (bool): compute sigmoid and tanh as ``OnnxRuntimeActivations`` does (an ONNX file), not
        with torch's ops (a TorchScript file).
    forward(char_ids (LongTensor (B, T, token_width)), lengths (LongTensor (B,))) returns the
    layers (L+1, B, T, 2 * projection_dim), zero at padding: ``BiLM(char_ids, lengths).layers``.
    """

    def __init__(self, bilm: BiLM, *, for_onnx: bool = False) -> None:
        super().__init__()
        detach(bilm)
        bilm.eval()
        config = bilm.config
        activations = OnnxRuntimeActivations() if for_onnx else Activations()
        self.encoder = ExportEncoder(bilm.token_encoder, activations)
        clips = (config.cell_clip, config.proj_clip)
        self.forward_stack = ExportStack(bilm.forward_lstm, config.dim, *clips, activations)
        self.backward_stack = ExportStack(bilm.backward_lstm, config.dim, *clips, activations)
        self.projection_dim = config.projection_dim

    def forward(self, char_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        batch = char_ids.size(0)
        steps = char_ids.size(1)
        positions = torch.arange(steps, device=char_ids.device).unsqueeze(0).expand(batch, steps)
        lengths = lengths.to(torch.long).unsqueeze(1)
        valid = positions < lengths
        mask = valid.to(torch.float32)
        encoded = self.encoder(char_ids.reshape(batch * steps, char_ids.size(2)))
        tokens = encoded.reshape(batch, steps, self.projection_dim) * mask.unsqueeze(2)
        # each row reversed within its length; padding positions stay where they are
        reverse = torch.where(valid, lengths - 1 - positions, positions)
        gather = reverse.unsqueeze(2).expand(batch, steps, self.projection_dim)
        forward_out = self.forward_stack(tokens, mask)
        backward_out = self.backward_stack(torch.gather(tokens, 1, gather), mask)
        layers = [torch.cat([tokens, tokens], dim=-1)]
        for f, b in zip(forward_out, backward_out):
            layers.append(torch.cat([f, torch.gather(b, 1, gather)], dim=-1))
        return torch.stack(layers)
