"""A bounded cache of char-CNN token encodings, for inference.

The token encoder costs about a quarter of the full model's arithmetic per token, and
text is dominated by a few thousand frequent tokens. The cache maps a token's
character ids to its encoding. It is filled from a frequency-ranked vocabulary (and then
kept as it is), or on the fly, evicting the least recently used entry beyond ``max_size``.

It is consulted only in eval mode with autograd off, and it forgets everything when
the encoder's weights change: each call compares a fingerprint of the parameters
(identity, storage, in-place version counter, dtype, device and the kind of each
linear layer), which optimizer steps, ``load_state_dict`` and ``.to()`` all change.
(Switching modes alone does not clear it: thinc's wrapper puts the module back in
training mode after every prediction.) Writes through ``param.data`` bypass version
counters; call ``clear()`` after such surgery.
"""
import itertools
import threading
from typing import TYPE_CHECKING, Callable, Dict, Hashable, Iterable, List, Optional, Set

import numpy as np
import torch

from ..bilm.chars import BOS_TOKEN, EOS_TOKEN, token_char_ids
from .lru import LRUCache
from .versions import weights_version

if TYPE_CHECKING:
    from ..bilm.token_encoder import CharCNNEncoder

# the elmo component's and load_bilm's cache size: the frequent tokens of most text
DEFAULT_CHAR_CACHE_SIZE = 20000


class CharCNNCache:
    """Token encodings keyed by character ids, least recently used evicted first.

    max_size (int): most tokens kept (>= 1). Each costs 4 * projection_dim bytes (2 KiB for the
        published models) plus about 0.5 KiB of bookkeeping.
    admit_new (bool): add tokens as they are seen (least recently used evicted first); if False,
        only ``fill`` adds entries, so a frequency-ranked vocabulary stays in place.
    """

    def __init__(self, max_size: int, *, admit_new: bool = True) -> None:
        if max_size < 1:
            raise ValueError(f"max_size must be >= 1, not {max_size}")
        self.max_size = max_size
        self.admit_new = admit_new
        self.hits = 0
        self.misses = 0
        self._entries = LRUCache(max_size)  # one unit of cost a token
        self._fingerprint: Optional[Hashable] = None
        # Guards the bookkeeping when several threads run the model; encoding happens outside it.
        self._lock = threading.Lock()

    def __getstate__(self) -> Dict:
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: Dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget all entries (and the hit/miss counts)."""
        with self._lock:
            self._entries.clear()
            self._fingerprint = None
            self.hits = self.misses = 0

    def encode(self, encoder: "CharCNNEncoder", rows: torch.Tensor) -> torch.Tensor:
        """Encodings of distinct rows of char ids (N, max_chars), from the cache where possible.

        encoder (CharCNNEncoder): computes the misses (``encode_rows``) and owns the weights.
        rows (LongTensor): distinct rows of character ids.
        RETURNS (Tensor): (N, projection_dim).
        """
        keys = _keys(rows)
        with self._lock:
            self._check(encoder)
            cached = [self._entries.get(key) for key in keys]  # hits become the most recently used
            missing = [i for i, entry in enumerate(cached) if entry is None]
            self.misses += len(missing)
            self.hits += len(keys) - len(missing)
        found = [i for i, entry in enumerate(cached) if entry is not None]
        if not found:
            result = encoder.encode_rows(rows)
        elif not missing:
            result = torch.stack([cached[i] for i in found])
        else:
            computed = encoder.encode_rows(rows[torch.tensor(missing, device=rows.device)])
            result = computed.new_empty(len(keys), computed.shape[1])
            result[torch.tensor(missing, device=rows.device)] = computed
            result[torch.tensor(found, device=rows.device)] = torch.stack([cached[i] for i in found])
        if self.admit_new:
            with self._lock:
                for i in missing:
                    self._insert(keys[i], result[i])
        return result

    def fill(
        self,
        encoder: "CharCNNEncoder",
        tokens: Iterable[str],
        *,
        batch_size: int = 1024,
        token_ids: Optional[Callable[[str, int], np.ndarray]] = None,
    ) -> int:
        """Encode ``tokens`` (most frequent first) into the cache, up to ``max_size`` of them.

        The sentence boundaries <S> and </S> come first: every sentence has both.
        token_ids (Optional[Callable[[str, int], np.ndarray]]): a token's id row at a width, as the
            model makes them (``BiLM.char_vocab.token_ids`` for a learned vocabulary, whose own
            boundary tokens are then not added); default: the published byte ids.
        RETURNS (int): the number of entries afterwards.
        """
        with self._lock:
            self._check(encoder)
        chosen: List[str] = []
        seen: Set[str] = set()
        boundaries = (BOS_TOKEN, EOS_TOKEN) if token_ids is None else ()
        token_ids = token_char_ids if token_ids is None else token_ids
        for token in itertools.chain(boundaries, tokens):
            if len(chosen) == self.max_size:
                break
            if token not in seen:
                seen.add(token)
                chosen.append(token)
        width = encoder.config.max_characters_per_token
        device = encoder.char_embedding.weight.device
        # Least frequent first, so the most frequent end up most recently used.
        chosen.reverse()
        with torch.no_grad():
            for start in range(0, len(chosen), batch_size):
                ids = np.stack([token_ids(t, width) for t in chosen[start : start + batch_size]])
                rows = torch.from_numpy(ids).to(device)
                encoded = encoder.encode_rows(rows)
                with self._lock:
                    for key, vector in zip(_keys(rows), encoded):
                        self._insert(key, vector)
        return len(self)

    def stats(self) -> Dict[str, float]:
        """RETURNS (Dict[str, float]): entries, hits, misses and hit_rate since the last clear."""
        total = self.hits + self.misses
        return {"entries": len(self), "hits": self.hits, "misses": self.misses, "hit_rate": self.hits / max(total, 1)}

    def _insert(self, key: bytes, vector: torch.Tensor) -> None:
        # A copy, so an entry does not keep its whole batch's output alive.
        self._entries.put(key, vector.detach().clone())

    def _check(self, encoder: "CharCNNEncoder") -> None:
        fingerprint = weights_version(encoder)
        if fingerprint != self._fingerprint:
            self._entries.clear()
            self._fingerprint = fingerprint


def _keys(rows: torch.Tensor) -> List[bytes]:
    # Character ids fit in int32 (published models use 262 of them); 200 bytes per key.
    array = rows.detach().to("cpu", torch.int32).numpy()
    return [row.tobytes() for row in array]
