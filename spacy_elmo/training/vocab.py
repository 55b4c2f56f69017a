"""The word vocabulary of the softmax: counted in one streaming pass, saved as ``vocab.txt``.

The file is bilm-tf's format: one token per line, ``<S>``, ``</S>``, ``<UNK>``
first, then words by decreasing count, so ids follow frequency as the
log-uniform sampler assumes.
"""
from collections import Counter
from pathlib import Path
from typing import Dict, Iterable, List, Sequence, Union

import numpy as np

from ..files import write_atomic
from ..bilm.chars import BOS_TOKEN, EOS_TOKEN

UNK_TOKEN = "<UNK>"
SPECIALS = (BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)
VOCAB_NAME = "vocab.txt"


class Vocab:
    """Token <-> id map with the three special tokens at ids 0, 1, 2.

    words (Sequence[str]): the non-special words, most frequent first.
    """

    def __init__(self, words: Sequence[str]) -> None:
        self.tokens: List[str] = list(SPECIALS) + [w for w in words if w not in SPECIALS]
        self.index: Dict[str, int] = {t: i for i, t in enumerate(self.tokens)}
        if len(self.index) != len(self.tokens):
            raise ValueError("vocabulary has duplicate tokens")
        self.bos = self.index[BOS_TOKEN]
        self.eos = self.index[EOS_TOKEN]
        self.unk = self.index[UNK_TOKEN]

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token: str) -> bool:
        return token in self.index

    def encode(self, tokens: Sequence[str], *, boundaries: bool = True) -> np.ndarray:
        """Ids of a sentence, with <S> and </S> around it if ``boundaries``. RETURNS (ndarray): int64."""
        ids = [self.index.get(t, self.unk) for t in tokens]
        if boundaries:
            ids = [self.bos] + ids + [self.eos]
        return np.asarray(ids, dtype=np.int64)

    @classmethod
    def from_counts(cls, counts: Counter, *, size: int, min_count: int = 1) -> "Vocab":
        """The ``size`` - 3 most frequent words seen at least ``min_count`` times (ties by first-seen order)."""
        if size < len(SPECIALS) + 1:
            raise ValueError(f"vocabulary size must be at least {len(SPECIALS) + 1}, not {size}")
        kept = [w for w, n in counts.most_common() if n >= min_count and w not in SPECIALS]
        return cls(kept[: size - len(SPECIALS)])

    def to_disk(self, path: Union[str, Path]) -> Path:
        """Write ``vocab.txt`` into a directory (or to a file path ending in .txt)."""
        path = Path(path)
        target = path if path.suffix == ".txt" else path / VOCAB_NAME
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, ("\n".join(self.tokens) + "\n").encode("utf-8"))
        return target

    @classmethod
    def from_disk(cls, path: Union[str, Path]) -> "Vocab":
        """Read ``vocab.txt`` (ours or bilm-tf's) from a directory or a file."""
        path = Path(path)
        target = path / VOCAB_NAME if path.is_dir() else path
        if not target.is_file():
            raise FileNotFoundError(f"{target}: vocabulary file not found")
        tokens = [line.strip() for line in target.read_text(encoding="utf-8").splitlines() if line.strip()]
        return cls(tokens)


def count_tokens(segments: Iterable[Sequence[str]]) -> Counter:
    """Token counts over a stream of segments (memory grows with distinct types, not with the corpus)."""
    counts: Counter = Counter()
    for tokens in segments:
        counts.update(tokens)
    return counts
