"""The linear probe: softmax regression on frozen, whitened vectors, trained by full-batch L-BFGS.

One fixed recipe for every layer and task, so scores differ only by what the vectors hold:
the vectors are whitened with the training set's statistics (each layer standardized, then
rotated and scaled by the principal components of the covariance), weights start from zero, L2 weight
decay, at most ``max_iter`` L-BFGS iterations with a strong-Wolfe line search. The objective
is convex for one layer, so its optimum depends on no seed. Whitening is for speed: on the
shipped model's EWT UPOS vectors L-BFGS reaches the optimum in about 30 iterations, where on
merely standardized vectors 300 are not enough (and leave 1-2 points of accuracy behind).

The scalar mix is the same model with ELMo's softmax-normalized layer weights and a scale
learned jointly over the standardized layers (no longer convex: it starts from their mean).
All layers share one whitening, that of their mean, so a mix of whitened layers is the
whitened mix: the model is exactly a scalar mix followed by a linear classifier. (Whitening
each layer apart scored 4 points below the plain mean on UPOS: the layers' coordinates no
longer line up.) Each layer's scores ``x_k W`` are computed apart and then mixed, which
equals mixing first and keeps the backward pass to matrix products.
"""
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

WEIGHT_DECAY = 1e-4
MAX_ITER = 50
EIGENVALUE_FLOOR = 1e-3


@dataclass
class LinearHead:
    """A trained probe. mean, std (Tensor): (K, 1, width). whiten (Tensor): (width, width).
    layer_logits (Tensor): (K,). gamma (Tensor): the mix's scale. weight (Tensor): (width, classes).
    bias (Tensor): (classes,)."""

    mean: torch.Tensor
    std: torch.Tensor
    whiten: torch.Tensor
    layer_logits: torch.Tensor
    gamma: torch.Tensor
    weight: torch.Tensor
    bias: torch.Tensor

    @property
    def layer_weights(self) -> np.ndarray:
        return torch.softmax(self.layer_logits, dim=0).numpy()

    def predict(self, features: np.ndarray) -> np.ndarray:
        """features (np.ndarray): (K, N, width), the layers the head was trained on. RETURNS (np.ndarray): (N,) class ids."""
        with torch.no_grad():
            return self._logits(self.transform(features)).argmax(dim=1).numpy()

    def transform(self, features: np.ndarray) -> torch.Tensor:
        x = torch.from_numpy(np.asarray(features, dtype=np.float32))
        return torch.matmul((x - self.mean) / self.std, self.whiten)

    def _logits(self, whitened: torch.Tensor) -> torch.Tensor:
        per_layer = torch.matmul(whitened, self.weight)
        mixed = torch.tensordot(torch.softmax(self.layer_logits, dim=0), per_layer, dims=1)
        return self.gamma * mixed + self.bias


def train_linear(
    features: np.ndarray,
    labels: np.ndarray,
    n_classes: int,
    *,
    learn_mix: bool = False,
    weight_decay: float = WEIGHT_DECAY,
    max_iter: int = MAX_ITER,
    seed: int = 0,
) -> LinearHead:
    """Fit a softmax-regression probe.

    features (np.ndarray): (K, N, width) training vectors; K = 1 for one layer.
    labels (np.ndarray): (N,) class ids below ``n_classes``.
    learn_mix (bool): learn softmax-normalized weights of the K layers and a scale (ELMo's scalar
        mix); otherwise the K standardized layers are averaged.
    weight_decay (float): L2 penalty on the weights, added to the mean cross-entropy.
    max_iter (int): L-BFGS iterations.
    seed (int): seeds torch (the recipe itself has no randomness).
    RETURNS (LinearHead): the trained probe.
    """
    if features.ndim != 3 or features.shape[1] != len(labels) or not len(labels):
        raise ValueError(f"features must be (K, N, width) with N = {len(labels)} labels > 0, not {features.shape}")
    torch.manual_seed(seed)
    x = torch.from_numpy(np.asarray(features, dtype=np.float32))
    y = torch.from_numpy(np.asarray(labels, dtype=np.int64))
    mean = x.mean(dim=1, keepdim=True)
    std = x.std(dim=1, keepdim=True, unbiased=False).clamp_min(1e-6)
    standardized = (x - mean) / std
    head = LinearHead(
        mean=mean,
        std=std,
        whiten=_whitening(standardized.mean(dim=0)),
        layer_logits=torch.zeros(x.shape[0], requires_grad=learn_mix),
        gamma=torch.ones((), requires_grad=learn_mix),
        weight=torch.zeros(x.shape[2], n_classes, requires_grad=True),
        bias=torch.zeros(n_classes, requires_grad=True),
    )
    whitened = torch.matmul(standardized, head.whiten)
    del standardized
    params = [head.weight, head.bias] + ([head.layer_logits, head.gamma] if learn_mix else [])
    optimizer = torch.optim.LBFGS(params, lr=1.0, max_iter=max_iter, history_size=20, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(head._logits(whitened), y) + 0.5 * weight_decay * head.weight.pow(2).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    for param in params:
        param.requires_grad_(False)
    return head


def _whitening(standardized: torch.Tensor) -> torch.Tensor:
    """(width, width) PCA whitening of standardized vectors; directions of (almost) no variance are not blown up."""
    covariance = (standardized.T.double() @ standardized.double()) / len(standardized)
    eigenvalues, eigenvectors = torch.linalg.eigh(covariance)
    return (eigenvectors / eigenvalues.clamp_min(EIGENVALUE_FLOOR).sqrt()).float()


def accuracy(predicted: np.ndarray, gold: np.ndarray) -> float:
    """RETURNS (float): percent of equal entries (0 for none)."""
    return 100.0 * float(np.mean(predicted == gold)) if len(gold) else 0.0


def majority_class(labels: np.ndarray, default: Optional[int] = None) -> int:
    """RETURNS (int): the most frequent id (the lowest on a tie), or ``default`` for no labels."""
    if not len(labels):
        if default is None:
            raise ValueError("no labels to take a majority of")
        return default
    return int(np.bincount(labels).argmax())
