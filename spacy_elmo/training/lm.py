"""The biLM with its word softmax: the module that training optimizes (and DDP wraps)."""
from typing import Dict, List, Optional

import torch
from torch import nn

from ..bilm import BiLM, BiLMState
from ..bilm.softmax import WordSoftmax
from ..fast import attach
from ..fast.dropout import dropout
from .batches import NO_TARGET, LMBatch


class LanguageModel(nn.Module):
    """Forward and backward language models sharing the token encoder and the softmax.

    bilm (BiLM): the model being trained (saved on its own afterwards).
    softmax (WordSoftmax): the head; sampled while training if built so, always full in eval mode.
    dropout (float): on every LSTM layer's input and on the top layer's output (as bilm-tf).
    """

    def __init__(self, bilm: BiLM, softmax: WordSoftmax, *, dropout: float = 0.0) -> None:
        super().__init__()
        if softmax.weight.shape[1] != bilm.config.projection_dim:
            raise ValueError("softmax width must equal the biLM's projection_dim")
        if bilm.runner is None:  # the one-node training step (and the in-place loop at evaluation)
            attach(bilm)
        self.bilm = bilm
        self.softmax = softmax
        self.dropout = dropout
        # Dropout enters through hooks so the biLM's own forward (and its numerics) stay untouched.
        self._hooks = [
            layer.register_forward_pre_hook(self._drop_input)
            for stack in (bilm.forward_lstm, bilm.backward_lstm)
            for layer in stack.layers
        ]

    def _drop_input(self, module: nn.Module, args: tuple) -> tuple:
        if not (self.training and self.dropout > 0):
            return args
        return (dropout(args[0], self.dropout), *args[1:])

    def forward(
        self,
        char_ids: torch.Tensor,
        lengths: torch.Tensor,
        forward_targets: torch.Tensor,
        backward_targets: torch.Tensor,
        initial_state: Optional[BiLMState] = None,
    ) -> Dict[str, object]:
        """Summed NLL of each direction's targets.

        RETURNS (dict): "forward_nll", "backward_nll" (scalar tensors, sums), "forward_n", "backward_n"
            (ints), "forward_token_nll", "backward_token_nll" (each target's NLL, detached, in row-major
            order of the targets kept), "state" (the final BiLMState, detached).
        """
        out = self.bilm(char_ids, lengths, initial_state=initial_state)
        top = out.layers[-1]
        if self.training and self.dropout > 0:
            top = dropout(top, self.dropout)
        width = self.bilm.config.projection_dim
        result: Dict[str, object] = {"state": _detach(out.state)}
        for name, hidden, targets in (
            ("forward", top[..., :width], forward_targets),
            ("backward", top[..., width:], backward_targets),
        ):
            keep = targets != NO_TARGET
            nll = self.softmax(hidden[keep], targets[keep])
            result[f"{name}_nll"] = nll.sum()
            result[f"{name}_token_nll"] = nll.detach()
            result[f"{name}_n"] = int(keep.sum())
        return result

    def run_batch(self, batch: LMBatch, initial_state: Optional[BiLMState] = None, *, module: Optional[nn.Module] = None):
        """Move a batch to the model's device and run ``module`` (this model, or its DDP wrapper)."""
        device = self.bilm.device
        module = self if module is None else module
        return module(
            torch.from_numpy(batch.char_ids).to(device),
            torch.from_numpy(batch.lengths),
            torch.from_numpy(batch.forward_targets).to(device),
            torch.from_numpy(batch.backward_targets).to(device),
            initial_state,
        )


def _detach(state: BiLMState) -> BiLMState:
    def each(direction: List) -> List:
        return [(h.detach(), c.detach()) for h, c in direction]

    return each(state[0]), each(state[1])


def init_for_training(bilm: BiLM) -> BiLM:
    """bilm-tf's starting point for a fresh model: forget-gate bias +1 (folded into our stored bias,
    as the published weights have it), highway carry bias -2 (layers start close to the identity),
    char embeddings uniform in [-1, 1]."""
    dim = bilm.config.dim
    with torch.no_grad():
        for stack in (bilm.forward_lstm, bilm.backward_lstm):
            for layer in stack.layers:
                layer.input_linearity.bias.zero_()
                layer.input_linearity.bias[2 * dim : 3 * dim] = 1.0
        for carry in bilm.token_encoder.highway.carry:
            carry.bias.fill_(-2.0)
        embedding = bilm.token_encoder.char_embedding.weight
        embedding.uniform_(-1.0, 1.0)
        embedding[0].zero_()
    return bilm
