"""Character ids exactly as the published ELMo models build them.

Each token becomes its UTF-8 bytes (+1, so 0 can mark a padding token), cut to
``max_characters_per_token - 2`` bytes (which may split a multi-byte character),
wrapped in begin/end-of-word marks and padded. The literal tokens "<S>" and
"</S>" map to the sentence-boundary ids, as in the reference code.
"""
import functools
from typing import List, Sequence, Tuple

import numpy as np

BOS_CHAR = 256
EOS_CHAR = 257
BOW_CHAR = 258
EOW_CHAR = 259
PAD_CHAR = 260
BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"


def _marker_ids(char: int, max_chars: int) -> np.ndarray:
    ids = np.full(max_chars, PAD_CHAR + 1, dtype=np.int64)
    ids[:3] = (BOW_CHAR + 1, char + 1, EOW_CHAR + 1)
    return ids


def token_char_ids(token: str, max_chars: int = 50) -> np.ndarray:
    """Character ids of one token, shape (max_chars,). Never raises for a str.

    Code points that UTF-8 cannot encode (lone surrogates) are dropped, as the
    reference's ``encode("utf-8", "ignore")`` does.
    """
    return _shared_char_ids(token, max_chars).copy()


# Building a row takes about 9 us and text repeats its tokens: sentences read rows from here
# (read-only, 8192 tokens: about 4 MB).
@functools.lru_cache(maxsize=8192)
def _shared_char_ids(token: str, max_chars: int) -> np.ndarray:
    ids = _build_char_ids(token, max_chars)
    ids.flags.writeable = False
    return ids


def _build_char_ids(token: str, max_chars: int) -> np.ndarray:
    if token == BOS_TOKEN:
        return _marker_ids(BOS_CHAR, max_chars)
    if token == EOS_TOKEN:
        return _marker_ids(EOS_CHAR, max_chars)
    encoded = token.encode("utf-8", "ignore")[: max_chars - 2]
    ids = np.full(max_chars, PAD_CHAR + 1, dtype=np.int64)
    ids[0] = BOW_CHAR + 1
    ids[1 : len(encoded) + 1] = np.frombuffer(encoded, dtype=np.uint8).astype(np.int64) + 1
    ids[len(encoded) + 1] = EOW_CHAR + 1
    return ids


def sentence_char_ids(tokens: Sequence[str], max_chars: int = 50, *, boundaries: bool = True) -> np.ndarray:
    """Character ids of a sentence, shape (n + 2, max_chars) with boundaries, else (n, max_chars)."""
    rows = [_shared_char_ids(t, max_chars) for t in tokens]
    if boundaries:
        rows = [_marker_ids(BOS_CHAR, max_chars)] + rows + [_marker_ids(EOS_CHAR, max_chars)]
    if not rows:
        return np.zeros((0, max_chars), dtype=np.int64)
    return np.stack(rows)


def batch_char_ids(
    sentences: Sequence[Sequence[str]], max_chars: int = 50, *, boundaries: bool = True
) -> Tuple[np.ndarray, np.ndarray]:
    """Padded character ids for a batch: ids (B, T, max_chars) with 0 for padding tokens, and lengths (B,)."""
    per_sentence: List[np.ndarray] = [sentence_char_ids(s, max_chars, boundaries=boundaries) for s in sentences]
    lengths = np.array([len(s) for s in per_sentence], dtype=np.int64)
    width = int(lengths.max()) if len(lengths) else 0
    ids = np.zeros((len(per_sentence), width, max_chars), dtype=np.int64)
    for row, sent in enumerate(per_sentence):
        ids[row, : len(sent)] = sent
    return ids, lengths
