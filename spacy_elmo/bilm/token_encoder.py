"""The character-level token encoder: char embedding -> CNN -> max-pool -> highway -> projection."""
import torch
from torch import nn

from .config import BiLMConfig
from .highway import Highway


class CharCNNEncoder(nn.Module):
    """Encode each token's character ids into a vector of width ``projection_dim``.

    config (BiLMConfig): the architecture.
    """

    def __init__(self, config: BiLMConfig) -> None:
        super().__init__()
        self.config = config
        # Row 0 is the padding-token id and stays zero, as in the published models.
        self.char_embedding = nn.Embedding(config.n_characters, config.char_embedding_dim, padding_idx=0)
        self.convolutions = nn.ModuleList(
            [nn.Conv1d(config.char_embedding_dim, n, kernel_size=w, bias=True) for w, n in config.filters]
        )
        self.highway = Highway(config.n_filters, config.n_highway)
        self.projection = nn.Linear(config.n_filters, config.projection_dim, bias=True)
        self._activation = torch.relu if config.activation == "relu" else torch.tanh

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        """char_ids (LongTensor): (..., max_chars). RETURNS (Tensor): (..., projection_dim)."""
        lead = char_ids.shape[:-1]
        flat = char_ids.reshape(-1, char_ids.shape[-1])
        embedded = self.char_embedding(flat).transpose(1, 2)  # (N, emb, chars)
        pooled = [self._activation(conv(embedded).max(dim=-1).values) for conv in self.convolutions]
        encoded = self.projection(self.highway(torch.cat(pooled, dim=-1)))
        return encoded.reshape(*lead, -1)
