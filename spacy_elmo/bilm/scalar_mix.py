"""ELMo_k = gamma * sum_j softmax(s)_j * h_kj, with optional per-sentence layer norm."""
from typing import Optional, Sequence

import torch
from torch import nn


class ScalarMix(nn.Module):
    """A learned (or fixed) weighted sum of biLM layers.

    n_layers (int): number of layers mixed (L + 1).
    initial_weights (Optional[Sequence[float]]): pre-softmax weights; zeros (the mean) if None.
    gamma (float): initial scale.
    do_layer_norm (bool): normalize each layer over each sentence's own tokens and features,
        never over the batch, so a sentence's output does not depend on its batch mates.
    trainable (bool): whether the weights and gamma receive gradients.
    """

    def __init__(
        self,
        n_layers: int,
        *,
        initial_weights: Optional[Sequence[float]] = None,
        gamma: float = 1.0,
        do_layer_norm: bool = False,
        trainable: bool = True,
    ) -> None:
        super().__init__()
        if initial_weights is None:
            initial_weights = [0.0] * n_layers
        if len(initial_weights) != n_layers:
            raise ValueError(f"ScalarMix got {len(initial_weights)} initial weights for {n_layers} layers")
        self.n_layers = n_layers
        self.do_layer_norm = do_layer_norm
        self.scalar_parameters = nn.Parameter(torch.tensor(list(initial_weights), dtype=torch.float32))
        self.gamma = nn.Parameter(torch.tensor([float(gamma)]))
        self.scalar_parameters.requires_grad_(trainable)
        self.gamma.requires_grad_(trainable)

    def forward(self, layers: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """layers (Tensor): (n_layers, B, T, D). mask (Optional[BoolTensor]): (B, T), needed for layer norm
        over padded batches. RETURNS (Tensor): (B, T, D)."""
        if layers.shape[0] != self.n_layers:
            raise ValueError(f"ScalarMix expects {self.n_layers} layers, got {layers.shape[0]}")
        weights = torch.softmax(self.scalar_parameters, dim=0).to(layers.dtype)
        if self.do_layer_norm:
            layers = _layer_norm_per_sentence(layers, mask)
        mixed = torch.einsum("l,lbtd->btd", weights, layers)
        return self.gamma.to(layers.dtype) * mixed


def _layer_norm_per_sentence(layers: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
    if mask is None:
        mask = torch.ones(layers.shape[1:3], dtype=torch.bool, device=layers.device)
    m = mask[None, :, :, None].to(layers.dtype)
    count = (m.sum(dim=(2, 3), keepdim=True) * layers.shape[-1]).clamp(min=1.0)
    mean = (layers * m).sum(dim=(2, 3), keepdim=True) / count
    variance = (((layers - mean) * m) ** 2).sum(dim=(2, 3), keepdim=True) / count
    return (layers - mean) / torch.sqrt(variance + 1e-12) * m
