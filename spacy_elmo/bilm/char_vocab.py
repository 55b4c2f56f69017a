"""Token ids from a learned character vocabulary (one id per code point), with optional word ids.

The published AllenNLP/bilm-tf models read UTF-8 bytes (``chars.py``). Models trained with
ELMoForManyLangs learn a vocabulary of characters instead, and may add a word embedding: a
token is then one row of ids, ``[word id, char ids...]``, so that everything that handles a
token's ids as one row (deduplication, the char-CNN cache, batching) keeps working. The word
slot is there even without a word embedding (0, unused): a row is one id wider than a byte-id
row, so byte ids given to such a model are refused instead of read as wrong characters.

A token is cut to ``max_chars - 2`` code points; its row is the begin-of-word id, the id of each
character (``unknown`` when not in the vocabulary), the end-of-word id, then ``padding``. The
sentence-boundary tokens hold the begin-of-word id, their own char id and the end-of-word id.
"""
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np


@dataclass(eq=False)
class CharVocabulary:
    """A learned character vocabulary and, optionally, the word vocabulary that goes with it.

    chars (Dict[str, int]): character (one code point) to id; ids are the rows of the char embedding.
    begin_word (int): the id in the first slot of every token.
    end_word (int): the id after a token's last character.
    padding (int): the id of the slots after that.
    unknown (int): the id of a character not in ``chars``.
    bos (int): the char id of the sentence-start token.
    eos (int): the char id of the sentence-end token.
    bos_token (str): the sentence-start token (an input token equal to it is encoded the same way).
    eos_token (str): the sentence-end token.
    words (Optional[Dict[str, int]]): word to id, the rows of a word embedding; None for none.
    word_unknown (int): the id of a word not in ``words``.
    word_dim (int): the word embedding's width (0 without words).
    """

    chars: Dict[str, int]
    begin_word: int
    end_word: int
    padding: int
    unknown: int
    bos: int
    eos: int
    bos_token: str = "<bos>"
    eos_token: str = "<eos>"
    words: Optional[Dict[str, int]] = None
    word_unknown: int = 0
    word_dim: int = 0
    _rows: Dict[Tuple[str, int], np.ndarray] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        problems = []
        n_chars = len(self.chars)
        for name in ("begin_word", "end_word", "padding", "unknown", "bos", "eos"):
            if not 0 <= getattr(self, name) < n_chars:
                problems.append(f"{name} id {getattr(self, name)} is not among the {n_chars} characters")
        if any(not 0 <= i < n_chars for i in self.chars.values()):
            problems.append(f"character ids must lie in 0..{n_chars - 1}")
        if (self.words is None) != (self.word_dim == 0):
            problems.append("give words and a positive word_dim together, or neither")
        if self.words is not None:
            n_words = len(self.words)
            if not 0 <= self.word_unknown < n_words or any(not 0 <= i < n_words for i in self.words.values()):
                problems.append(f"word ids must lie in 0..{n_words - 1}")
        if problems:
            raise ValueError("Invalid character vocabulary: " + "; ".join(problems))

    @property
    def n_chars(self) -> int:
        return len(self.chars)

    @property
    def n_words(self) -> int:
        return 0 if self.words is None else len(self.words)

    def token_ids(self, token: str, max_chars: int) -> np.ndarray:
        """The ids of one token, shape (1 + max_chars,): its word id, then its character ids."""
        key = (token, max_chars)
        row = self._rows.get(key)
        if row is None:
            row = self._build_row(token, max_chars)
            row.flags.writeable = False
            if len(self._rows) < 8192:  # text repeats its tokens; a bounded memo of their rows
                self._rows[key] = row
        return row

    def _build_row(self, token: str, max_chars: int) -> np.ndarray:
        boundary = token in (self.bos_token, self.eos_token)
        if not boundary:
            token = token[: max_chars - 2]
        row = np.full(1 + max_chars, self.padding, dtype=np.int64)
        row[0] = 0 if self.words is None else self.words.get(token, self.word_unknown)
        chars = row[1:]
        chars[0] = self.begin_word
        if boundary:
            chars[1:3] = (self.bos if token == self.bos_token else self.eos, self.end_word)
            return row
        chars[1 : len(token) + 1] = [self.chars.get(c, self.unknown) for c in token]
        chars[len(token) + 1] = self.end_word
        return row

    def batch_ids(
        self, sentences: Sequence[Sequence[str]], max_chars: int, *, boundaries: bool = True
    ) -> Tuple[np.ndarray, np.ndarray]:
        """Padded ids for a batch: ids (B, T, 1 + max_chars), all 0 for padding tokens, and lengths (B,).

        boundaries (bool): wrap each sentence in ``bos_token`` ... ``eos_token``.
        """
        wrapped: List[Sequence[str]] = [
            [self.bos_token, *s, self.eos_token] if boundaries else list(s) for s in sentences
        ]
        lengths = np.array([len(s) for s in wrapped], dtype=np.int64)
        width = int(lengths.max()) if len(lengths) else 0
        ids = np.zeros((len(wrapped), width, 1 + max_chars), dtype=np.int64)
        for row, tokens in enumerate(wrapped):
            for position, token in enumerate(tokens):
                ids[row, position] = self.token_ids(token, max_chars)
        return ids, lengths

    def to_json(self) -> Dict[str, Any]:
        """The vocabulary as JSON-serializable data (``from_json`` reads it back)."""
        names = ("chars", "begin_word", "end_word", "padding", "unknown", "bos", "eos", "bos_token", "eos_token")
        data = {name: getattr(self, name) for name in names}
        if self.words is not None:
            data.update(words=self.words, word_unknown=self.word_unknown, word_dim=self.word_dim)
        return data

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "CharVocabulary":
        """Read what ``to_json`` wrote, raising ValueError on missing or malformed fields."""
        try:
            return cls(
                chars={str(k): int(v) for k, v in data["chars"].items()},
                **{name: int(data[name]) for name in ("begin_word", "end_word", "padding", "unknown", "bos", "eos")},
                bos_token=str(data["bos_token"]),
                eos_token=str(data["eos_token"]),
                words=None if data.get("words") is None else {str(k): int(v) for k, v in data["words"].items()},
                word_unknown=int(data.get("word_unknown", 0)),
                word_dim=int(data.get("word_dim", 0)),
            )
        except (KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"character vocabulary is missing or has a malformed field: {err!r}") from err
