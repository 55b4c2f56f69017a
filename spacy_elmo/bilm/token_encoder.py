"""The character-level token encoder: char embedding -> CNN -> max-pool -> highway -> projection.

Two savings that leave the results unchanged: a batch's distinct tokens are encoded once
(``<S>``, "the" and "," recur in every batch), and the convolutions only run over the part
of a token that holds characters. A token's ids end in a run of one filler id (PAD, or 0 in
an all-padding row); every convolution window that lies inside that run sees the same input
and gives the same value, so one such window stands for all of them in the max-pool. Most
tokens need 8-16 of the 50 positions. (These savings are part of the reference: they decide its
float32 rounding, which every other path is compared with bit for bit.) How the distinct rows are
encoded can be handed in (``encode_distinct``'s ``encode_rows``): the runner of ``spacy_elmo.fast``
passes its char-CNN cache, which keeps encodings of frequent tokens across calls at inference.

With a learned character vocabulary (``char_vocab.py``, ELMoForManyLangs' models) a token's row
starts with its word id; with a word embedding, the projection reads ``[word embedding ; highway
output]``, in that order, as those models were trained.
"""
from typing import Callable, List, Optional, Tuple

import numpy as np
import torch
from torch import nn

from .char_vocab import CharVocabulary
from .config import BiLMConfig
from .highway import Highway

# Spans are rounded up to a multiple of this, so tokens of similar length share one convolution call.
SPAN_STEP = 4
# Convolution outputs held at once (rows x filters x positions), to bound memory on large batches.
MAX_CONV_ELEMENTS = 1 << 23



def take_rows(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``table[index]`` for a LongTensor ``index`` of any shape: rows of ``table`` (R, ...) gathered
    by ``index_select``, whose backward sums a row's repeated gradients in a fixed order on any
    number of threads (advanced indexing's backward, ``index_put_`` with accumulation, sums them
    in whatever order the threads reach them, so a seeded run at two threads did not repeat).
    RETURNS (Tensor): (*index.shape, ...)."""
    return table.index_select(0, index.reshape(-1)).view(*index.shape, *table.shape[1:])

class CharCNNEncoder(nn.Module):
    """Encode each token's character ids into a vector of width ``projection_dim``.

    config (BiLMConfig): the architecture.
    char_vocab (Optional[CharVocabulary]): a learned character vocabulary (and word embedding)
        instead of the byte ids; its size must be ``config.n_characters``.
    """

    def __init__(self, config: BiLMConfig, char_vocab: Optional[CharVocabulary] = None) -> None:
        super().__init__()
        self.config = config
        if char_vocab is not None and char_vocab.n_chars != config.n_characters:
            raise ValueError(
                f"the character vocabulary has {char_vocab.n_chars} entries, the config {config.n_characters}"
            )
        # Byte ids: row 0 is the padding-token id and stays zero, as in the published models. A
        # learned vocabulary names its own padding character, whose row is trained and used.
        padding = 0 if char_vocab is None else char_vocab.padding
        self.char_embedding = nn.Embedding(config.n_characters, config.char_embedding_dim, padding_idx=padding)
        self.word_embedding: Optional[nn.Embedding] = None
        word_dim = 0
        if char_vocab is not None and char_vocab.words is not None:
            word_dim = char_vocab.word_dim
            self.word_embedding = nn.Embedding(char_vocab.n_words, word_dim)
        self.convolutions = nn.ModuleList(
            [nn.Conv1d(config.char_embedding_dim, n, kernel_size=w, bias=True) for w, n in config.filters]
        )
        self.highway = Highway(config.n_filters, config.n_highway)
        self.projection = nn.Linear(word_dim + config.n_filters, config.projection_dim, bias=True)
        # a learned vocabulary's rows start with the word id (char_vocab.py)
        self.first_char = 0 if char_vocab is None else 1
        self._activation = torch.relu if config.activation == "relu" else torch.tanh

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        """char_ids (LongTensor): (..., max_chars). RETURNS (Tensor): (..., projection_dim)."""
        encoded, inverse = self.encode_distinct(char_ids)
        return take_rows(encoded, inverse)

    def encode_distinct(
        self, char_ids: torch.Tensor, encode_rows: Optional[Callable[[torch.Tensor], torch.Tensor]] = None
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """Each distinct token once: what ``forward`` returns is ``encoded[inverse]``.

        char_ids (LongTensor): (..., max_chars).
        encode_rows (Optional[Callable]): encodes the distinct rows as ``self.encode_rows`` does (the
            default), for example through a cache.
        RETURNS (Tuple[Tensor, LongTensor]): encodings (U, projection_dim) of the U distinct rows
            of char ids, and for each token (shape ``...``) the index of its row.
        """
        lead = char_ids.shape[:-1]
        flat = char_ids.reshape(-1, char_ids.shape[-1])
        if flat.shape[0] == 0:
            empty = self.projection.weight.new_zeros(0, self.config.projection_dim)
            return empty, torch.zeros(lead, dtype=torch.long, device=char_ids.device)
        distinct, inverse = unique_rows(flat)
        encoded = (self.encode_rows if encode_rows is None else encode_rows)(distinct)
        return encoded, inverse.reshape(lead)

    def encode_rows(self, rows: torch.Tensor) -> torch.Tensor:
        """Encode every row of ``rows`` (N, row width): (N, projection_dim), no deduplication or cache."""
        features = self.highway(self._pool(rows[:, self.first_char :]))
        if self.word_embedding is not None:
            features = torch.cat([self.word_embedding(rows[:, 0]), features], dim=-1)
        return self.projection(features)

    def _pool(self, rows: torch.Tensor) -> torch.Tensor:
        """Max-pooled, activated convolution features (N, n_filters), over each row's needed span only."""
        n_rows, width = rows.shape
        spans = _spans(rows, max(w for w, _ in self.config.filters))
        pieces: List[torch.Tensor] = []
        indices: List[torch.Tensor] = []
        for span in sorted(set(spans.tolist())):
            index = torch.nonzero(spans == span).flatten().to(rows.device)
            chunk = max(1, MAX_CONV_ELEMENTS // (self.config.n_filters * span))
            for start in range(0, len(index), chunk):
                part = index[start : start + chunk]
                embedded = self.char_embedding(rows[part, :span]).transpose(1, 2)  # (n, emb, span)
                pooled = [self._activation(_max_over_positions(conv(embedded))) for conv in self.convolutions]
                pieces.append(torch.cat(pooled, dim=-1))
                indices.append(part)
        if len(pieces) == 1:
            return pieces[0]
        result = pieces[0].new_empty(n_rows, pieces[0].shape[1])
        result[torch.cat(indices)] = torch.cat(pieces)
        return result


def _spans(rows: torch.Tensor, widest: int) -> torch.Tensor:
    """Positions each row needs (N,), rounded up to SPAN_STEP and at most the row width.

    ``used`` positions hold something other than the row's trailing filler id; the windows that
    touch them start before ``used``. The window starting at ``used`` is filler only and stands
    for every other such window; the full-width convolution has one whenever ``used + width_of_filter
    <= chars``, and a span of ``used + widest`` positions keeps it for every filter width.
    """
    chars = rows.shape[1]
    differs = rows != rows[:, -1:]
    positions = torch.arange(1, chars + 1, device=rows.device)
    used = (differs * positions).amax(dim=1)
    spans = ((used + widest + SPAN_STEP - 1) // SPAN_STEP) * SPAN_STEP
    return spans.clamp(max=chars).cpu()


def unique_rows(rows: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """The distinct rows of a 2-D tensor and each row's index among them, as
    ``torch.unique(rows, dim=0, return_inverse=True)`` gives them but in another (fixed) order.

    On CPU each row is compared as one opaque byte string in numpy: torch's ``unique(dim=0)``
    makes a tensor view and a copy per row (94 ms for 6,000 rows of 50 ids against numpy's 8 ms,
    a one-off reading).
    """
    if rows.shape[1] == 0:  # rows without columns are all equal
        return rows[:1], torch.zeros(rows.shape[0], dtype=torch.long, device=rows.device)
    if rows.device.type != "cpu" or rows.shape[0] == 0:
        return torch.unique(rows, dim=0, return_inverse=True)
    array = np.ascontiguousarray(rows.numpy())
    keys = array.view(np.dtype((np.void, array.dtype.itemsize * array.shape[1]))).reshape(-1)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return rows[torch.from_numpy(first)], torch.from_numpy(inverse.reshape(-1).astype(np.int64))


def _max_over_positions(convolved: torch.Tensor) -> torch.Tensor:
    """Max over the last dimension. Under autograd through ``max`` (its backward scatters into the
    argmax; ``amax``'s compares every position with the maximum, several times slower in a one-off
    profile). Ties pick
    one position instead of sharing: the windows that tie are filler-only, with equal inputs, so
    the weights' gradients are the same."""
    if convolved.requires_grad:
        return convolved.max(dim=-1).values
    return convolved.amax(dim=-1)
