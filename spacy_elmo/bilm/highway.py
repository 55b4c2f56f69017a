"""Highway layers in bilm-tf's convention: y = t * relu(W_t x) + (1 - t) * x, t = sigmoid(W_c x)."""
import torch
from torch import nn


class Highway(nn.Module):
    """A stack of highway layers of constant width.

    width (int): input and output width.
    n_layers (int): number of layers (0 is the identity).
    """

    def __init__(self, width: int, n_layers: int) -> None:
        super().__init__()
        self.transform = nn.ModuleList([nn.Linear(width, width) for _ in range(n_layers)])
        self.carry = nn.ModuleList([nn.Linear(width, width) for _ in range(n_layers)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for transform, carry in zip(self.transform, self.carry):
            gate = torch.sigmoid(carry(x))
            x = gate * torch.relu(transform(x)) + (1.0 - gate) * x
        return x
