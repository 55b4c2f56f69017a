"""ELMo_k = gamma * sum_j softmax(s)_j * h_kj, with optional per-sentence layer norm.

``ScalarMix`` is the definition, in torch on padded batches. The array functions below are the
same math on one sentence's (n_layers, n_tokens, width) layers, for numpy and cupy: the thinc
``ElmoMix`` (hand-written backward) and ``doc._.elmo``'s mix call them. ``layer_norm`` uses only
operations numpy, cupy and torch share, so all three normalize with one function.
``select_layer`` picks one layer of a sentence's layers, or their plain mean.
"""
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch import nn

LAYER_NORM_EPS = 1e-12
Layer = Union[int, str]  # an index into the L+1 layers, or "mean"


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
            layers, _ = layer_norm(layers, None if mask is None else mask.to(layers.dtype))
        mixed = torch.einsum("l,lbtd->btd", weights, layers)
        return self.gamma.to(layers.dtype) * mixed


def layer_norm(layers: Any, mask: Optional[Any] = None) -> Tuple[Any, Any]:
    """Normalize every layer over each sentence's own tokens and features (numpy, cupy or torch).

    layers: (n_layers, ..., n_tokens, width).
    mask: (..., n_tokens), 1 for a real token and 0 for padding, in ``layers``' dtype; None: all real.
    RETURNS: the normalized layers (0 at padding) and 1 / std per layer and sentence (for a backward).
    """
    axes = (-2, -1)
    if mask is None:
        count = max(layers.shape[-2] * layers.shape[-1], 1)
        centred = layers - layers.sum(axis=axes, keepdims=True) / count
    else:
        m = mask[..., None]
        count = m.sum(axis=axes, keepdims=True) * layers.shape[-1]
        count = count + (count == 0)  # an empty sentence: 0 / 1, not 0 / 0
        centred = (layers - (layers * m).sum(axis=axes, keepdims=True) / count) * m
    inv_std = 1.0 / ((centred**2).sum(axis=axes, keepdims=True) / count + LAYER_NORM_EPS) ** 0.5
    return centred * inv_std, inv_std


def softmax_weights(weights: Sequence[float], n_layers: int, xp: Any = np) -> Any:
    """softmax(s) as float32 (computed in float64); equal weights when ``weights`` is empty.

    weights (Sequence[float]): pre-softmax weights, one per layer (a sequence or an ``xp`` array).
    n_layers (int): L + 1.
    xp: numpy or cupy, where the result lives.
    """
    if len(weights) == 0:
        return xp.full(n_layers, 1.0 / n_layers, dtype=xp.float32)
    if len(weights) != n_layers:
        raise ValueError(f"mix_weights has {len(weights)} values but the biLM has {n_layers} layers (L+1)")
    values = xp.asarray(weights, dtype=xp.float64)
    exp = xp.exp(values - values.max())
    return (exp / exp.sum()).astype(xp.float32)


def mix_layers(layers: Any, weights: Any, gamma: float, xp: Any = np) -> Any:
    """gamma * sum_j weights_j * layers[j] for one sentence: (n_layers, n_tokens, width) to (n_tokens, width).

    weights: the softmax-normalized weights (``softmax_weights``), in ``xp``.
    """
    # asarray, not xp.float32(gamma): cupy's float32 is numpy's, which refuses a GPU array
    return xp.tensordot(weights, layers, axes=1) * xp.asarray(gamma, dtype=xp.float32)


def select_layer(layers: np.ndarray, layer: Layer) -> np.ndarray:
    """One sentence's (n_layers, n_tokens, width) layers at one index, or their "mean" (all layers
    with equal weights): (n_tokens, width)."""
    if layer == "mean":
        return layers.mean(axis=0)
    if isinstance(layer, int) and -layers.shape[0] <= layer < layers.shape[0]:
        return layers[layer]
    raise ValueError(f"layer must be 'mean' or an index below {layers.shape[0]}, not {layer!r}")
