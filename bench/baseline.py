"""The straightforward biLM forward that the benchmark compares against.

It computes what ``spacy_elmo.bilm.BiLM`` computes, the way the original code
(AllenNLP's ``_ElmoBiLm``) does: the char-CNN runs over every position of the
padded batch, each LSTM timestep applies the input projection to that step's
inputs only, the gates come from separate slices, and the full state tensors are
cloned and written at every step. Kept deliberately plain: it is the reference
point for speed ratios and for output equality, not code to optimize.
"""
from typing import List

import torch
from torch import nn

from spacy_elmo.bilm import BiLM


class BaselineLSTMP(nn.Module):
    """One LSTMP layer of one direction, run timestep by timestep."""

    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        self.dim, self.cell_clip, self.proj_clip = layer.dim, layer.cell_clip, layer.proj_clip
        self.input_linearity = _copy_linear(layer.input_linearity)
        self.state_linearity = _copy_linear(layer.state_linearity)
        self.projection = _copy_linear(layer.projection)

    def forward(self, inputs: torch.Tensor, lengths: List[int]) -> torch.Tensor:
        """inputs (Tensor): (B, T, in), rows sorted by decreasing length. RETURNS (Tensor): (B, T, proj)."""
        batch, steps, _ = inputs.shape
        d = self.dim
        out = inputs.new_zeros(batch, steps, self.projection.out_features)
        h = inputs.new_zeros(batch, self.projection.out_features)
        c = inputs.new_zeros(batch, d)
        for t in range(steps):
            n = sum(1 for length in lengths if length > t)
            projected_input = self.input_linearity(inputs[:n, t])
            projected_state = self.state_linearity(h[:n])
            i = torch.sigmoid(projected_input[:, :d] + projected_state[:, :d])
            j = torch.tanh(projected_input[:, d : 2 * d] + projected_state[:, d : 2 * d])
            f = torch.sigmoid(projected_input[:, 2 * d : 3 * d] + projected_state[:, 2 * d : 3 * d])
            o = torch.sigmoid(projected_input[:, 3 * d :] + projected_state[:, 3 * d :])
            memory = i * j + f * c[:n]
            if self.cell_clip is not None:
                memory = torch.clamp(memory, -self.cell_clip, self.cell_clip)
            output = self.projection(o * torch.tanh(memory))
            if self.proj_clip is not None:
                output = torch.clamp(output, -self.proj_clip, self.proj_clip)
            h = h.clone()
            c = c.clone()
            h[:n] = output
            c[:n] = memory
            out[:n, t] = output
        return out


class BaselineBiLM(nn.Module):
    """A plain-code copy of a biLM's weights and computation.

    bilm (BiLM): the float32 model to copy (its weights are copied, not shared).
    """

    def __init__(self, bilm: BiLM) -> None:
        super().__init__()
        cfg = bilm.config
        enc = bilm.token_encoder
        self.config = cfg
        self.char_embedding = nn.Embedding.from_pretrained(enc.char_embedding.weight.detach().clone(), freeze=False)
        self.convolutions = nn.ModuleList()
        for conv in enc.convolutions:
            copy = nn.Conv1d(conv.in_channels, conv.out_channels, conv.kernel_size[0])
            copy.load_state_dict(conv.state_dict())
            self.convolutions.append(copy)
        self.transform = nn.ModuleList([_copy_linear(m) for m in enc.highway.transform])
        self.carry = nn.ModuleList([_copy_linear(m) for m in enc.highway.carry])
        self.char_projection = _copy_linear(enc.projection)
        self.activation = torch.relu if cfg.activation == "relu" else torch.tanh
        self.forward_layers = nn.ModuleList([BaselineLSTMP(layer) for layer in bilm.forward_lstm.layers])
        self.backward_layers = nn.ModuleList([BaselineLSTMP(layer) for layer in bilm.backward_lstm.layers])

    def encode_tokens(self, char_ids: torch.Tensor) -> torch.Tensor:
        """(B, T, chars) -> (B, T, proj), every position (padding too) through the CNN."""
        batch, steps, chars = char_ids.shape
        embedded = self.char_embedding(char_ids.reshape(-1, chars)).transpose(1, 2)
        pooled = [self.activation(conv(embedded).max(dim=-1).values) for conv in self.convolutions]
        x = torch.cat(pooled, dim=-1)
        for transform, carry in zip(self.transform, self.carry):
            gate = torch.sigmoid(carry(x))
            x = gate * torch.relu(transform(x)) + (1.0 - gate) * x
        return self.char_projection(x).reshape(batch, steps, -1)

    def forward(self, char_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """char_ids (LongTensor): (B, T, chars). lengths (LongTensor): (B,).
        RETURNS (Tensor): (L+1, B, T, 2 * proj), zero at padding, as ``BiLM(...).layers``.
        """
        batch, steps, _ = char_ids.shape
        mask = (torch.arange(steps)[None, :] < lengths[:, None]).to(char_ids.device)
        tokens = self.encode_tokens(char_ids) * mask[..., None]
        order = torch.argsort(lengths, descending=True, stable=True)
        sorted_lengths = [int(n) for n in lengths[order]]
        x_fwd = tokens[order.to(tokens.device)]
        x_bwd = torch.stack(
            [torch.cat([row[:n].flip(0), row[n:]]) for row, n in zip(x_fwd, sorted_lengths)]
        ) if batch else x_fwd
        directions = []
        for layers, x in ((self.forward_layers, x_fwd), (self.backward_layers, x_bwd)):
            outputs = []
            for k, layer in enumerate(layers):
                y = layer(x, sorted_lengths)
                if k > 0 and self.config.use_skip_connections:
                    y = y + x
                outputs.append(y)
                x = y
            directions.append(outputs)
        unsort = torch.argsort(order).to(tokens.device)
        result = [torch.cat([tokens, tokens], dim=-1)]
        for fwd, bwd in zip(*directions):
            bwd = torch.stack([torch.cat([row[:n].flip(0), row[n:]]) for row, n in zip(bwd, sorted_lengths)])
            result.append(torch.cat([fwd, bwd], dim=-1)[unsort])
        return torch.stack(result)


def _copy_linear(linear: nn.Linear) -> nn.Linear:
    copy = nn.Linear(linear.in_features, linear.out_features, bias=linear.bias is not None)
    with torch.no_grad():
        copy.weight.copy_(linear.weight.contiguous())
        if linear.bias is not None:
            copy.bias.copy_(linear.bias)
    return copy
