"""Domain words joining a trained model's vocabulary and softmax before fine-tuning.

A model that keeps its vocabulary predicts every domain word it lacks as ``<UNK>``: the words a
domain is made of (a newswire's "mln", "dlrs", its company names) are never learned, and its
perplexity is flattered by the easy ``<UNK>``. ``[finetune] add_words = N`` counts the domain's
words outside the vocabulary in one streaming pass and appends the N most frequent (seen at least
``add_min_count`` times) to the vocabulary, with a softmax row each.

A new row is not random: the biLM's token encoder already gives every word an encoding from its
characters, and the softmax rows of the words it knows are, to a good approximation, a linear
function of those encodings (the same characters, the same kind of word). That function is fitted
by ridge regression on the known words (their encodings -> their softmax weight and bias), and each
new word's row is the fit applied to its own encoding; fine-tuning then trains them with the rest.

The words are appended after the old ones, so the old words keep their ids and the perplexity over
the words both vocabularies share is the one over the first ``len(old)`` ids
(``perplexity.evaluate_perplexity(shared=...)``).

A word is never added for damage the text carries (``unfit_reason``): U+FFFD (bytes that were not
UTF-8, replaced when read), invisible format characters (a byte order mark, zero-width spaces,
direction marks and overrides, soft hyphens), control characters or lone surrogates. Such words are
counted by reason (``PassedOver``) and the log says how many were passed over. Joiners (U+200C,
U+200D) inside a word are text, not damage (Persian, Indic scripts, emoji sequences), and so are the
tag characters of an emoji flag; emoji, accents and decomposed forms are the text's own and are kept.
"""
import functools
import re
import sys
import tempfile
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import torch

from ..bilm import BiLM
from .counting import TokenCounts
from .vocab import SPECIALS, Vocab

# words encoded at a time (token encoder memory: words x max_chars x filters)
ENCODE_BATCH = 2048
# the ridge penalty of the fit, relative to the mean squared encoding (keeps it stable for a few words)
RIDGE = 1e-3

# why a word outside the vocabulary is passed over rather than added (``unfit_reason``), as the log says it
UNFIT_REASONS = {
    "replaced": "U+FFFD (bytes that were not UTF-8, replaced when read)",
    "format": "invisible format characters (byte order mark, zero-width, direction or soft-hyphen marks)",
    "control": "control characters",
    "surrogate": "lone surrogates",
}
REPLACEMENT = "\ufffd"
# zero-width non-joiner and joiner: text inside a word of a script that joins (Persian, Indic scripts,
# emoji sequences); between two Latin letters or ASCII characters, damage
JOINERS = "\u200c\u200d"
# tag characters: text after the black flag of an emoji subdivision flag sequence
TAGS = range(0xE0020, 0xE0080)
FLAG = "\U0001F3F4"
# examples of passed-over words the log and the report name, per reason
NAMED = 3


@functools.lru_cache(maxsize=1)
def _suspect() -> "re.Pattern[str]":
    """One character class of U+FFFD and every control, format and surrogate character of this
    Python's Unicode tables (built once, on first use)."""
    codes = [code for code in range(sys.maxunicode + 1) if unicodedata.category(chr(code)) in ("Cc", "Cf", "Cs")]
    codes.append(ord(REPLACEMENT))
    ranges: List[List[int]] = []
    for code in sorted(codes):
        if ranges and code == ranges[-1][1] + 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    return re.compile("[" + "".join(f"\\U{low:08x}-\\U{high:08x}" for low, high in ranges) + "]")


def unfit_reason(word: str) -> Optional[str]:
    """Why ``word`` must not join a vocabulary: a key of ``UNFIT_REASONS``; None where it may."""
    if not _suspect().search(word):
        return None
    if REPLACEMENT in word:
        return "replaced"
    for index, char in enumerate(word):
        category = unicodedata.category(char)
        if category == "Cs":
            return "surrogate"
        if category == "Cc":
            return "control"
        if category != "Cf":
            continue
        if char in JOINERS and 0 < index < len(word) - 1 and not (_latin(word[index - 1]) and _latin(word[index + 1])):
            continue  # between letters of a script that joins (Arabic, Indic) or an emoji sequence
        if ord(char) in TAGS and FLAG in word[:index]:
            continue
        return "format"
    return None


def _latin(char: str) -> bool:
    """ASCII or a Latin letter: scripts in which a joiner inside a word is damage, not spelling."""
    return char.isascii() or "LATIN" in unicodedata.name(char, "")


def shown(word: str) -> str:
    """``word`` with its unfit characters written as escapes (``\\ufeff``), so a log shows them."""
    def escaped(char: str) -> str:
        return f"\\u{ord(char):04x}" if ord(char) <= 0xFFFF else f"\\U{ord(char):08x}"

    return "".join(escaped(char) if _suspect().match(char) else char for char in word)


@dataclass
class PassedOver:
    """The words outside the vocabulary ``domain_words`` passed over (``unfit_reason``), by reason:
    distinct words, their occurrences, how many were seen ``min_count`` times or more (so that
    ``add_words`` would have weighed them), and the most frequent few (escaped, ``shown``)."""

    words: Counter = field(default_factory=Counter)
    occurrences: Counter = field(default_factory=Counter)
    frequent: Counter = field(default_factory=Counter)
    examples: Dict[str, List[Tuple[str, int]]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.words.values())

    def to_dict(self) -> Dict[str, Dict[str, object]]:
        return {reason: {"words": self.words[reason], "occurrences": self.occurrences[reason],
                         "frequent": self.frequent[reason], "examples": [word for word, _ in self.examples.get(reason, [])]}
                for reason in self.words}

    def summary(self, min_count: int) -> str:
        """One line for the log: how many words were passed over and why ("" where none was)."""
        if not self.total:
            return ""
        parts = [f"{self.words[reason]} with {UNFIT_REASONS[reason]}, e.g. "
                 + ", ".join(f"'{word}' x{count}" for word, count in self.examples.get(reason, []))
                 for reason in UNFIT_REASONS if self.words[reason]]
        return (f"vocabulary: {self.total} words outside it passed over, not added ({sum(self.occurrences.values())} "
                f"occurrences; {sum(self.frequent.values())} seen {min_count}+ times): " + "; ".join(parts))


@dataclass
class Growth:
    """What ``grow_vocabulary`` did: the words added with their counts, the fit's quality."""

    words: List[str]
    counts: List[int]
    old_size: int
    fit_r2: float
    # the words passed over as unfit (``PassedOver.to_dict``); None where none was counted
    passed_over: Optional[Dict[str, Dict[str, object]]] = None

    def to_dict(self) -> Dict[str, object]:
        return {"added": len(self.words), "old_size": self.old_size, "new_size": self.old_size + len(self.words),
                "fit_r2": self.fit_r2, "first_words": self.words[:20], "passed_over": self.passed_over or {}}


def domain_words(
    segments: Iterable[Sequence[str]], vocab: Vocab, *, limit: int, min_count: int,
    passed_over: Optional[PassedOver] = None,
) -> List[Tuple[str, int]]:
    """The ``limit`` most frequent words of ``segments`` outside ``vocab`` seen at least ``min_count``
    times (ties by first seen), counted in bounded memory (``counting.TokenCounts``); words with an
    ``unfit_reason`` are left out, and counted into ``passed_over`` where it is given.

    RETURNS (List[Tuple[str, int]]): (word, count), most frequent first.
    """
    if limit <= 0:
        return []
    with tempfile.TemporaryDirectory(prefix="spacy-elmo-domain-words-") as folder:
        # two folders: each spills its runs under the same names
        counts, unfit = TokenCounts(Path(folder) / "kept"), TokenCounts(Path(folder) / "unfit")
        for counted in (counts, unfit):
            counted.folder.mkdir()
        for tokens in segments:
            new = [token for token in tokens if token not in vocab.index]
            if any(_suspect().search(token) for token in new):
                unfit.update([token for token in new if unfit_reason(token)])
                new = [token for token in new if not unfit_reason(token)]
            counts.update(new)
        kept = counts.vocab(size=limit + len(SPECIALS), min_count=min_count)
        words = kept.tokens[len(SPECIALS):]
        found = {word: count for word, count, _ in counts._merged() if word in kept.index}
        if passed_over is not None:
            _count_unfit(unfit, passed_over, min_count)
    return [(word, found[word]) for word in words]


def _count_unfit(unfit: TokenCounts, passed_over: PassedOver, min_count: int) -> None:
    for word, count, _ in unfit._merged():
        reason = unfit_reason(word)
        passed_over.words[reason] += 1
        passed_over.occurrences[reason] += count
        passed_over.frequent[reason] += count >= min_count
        examples = passed_over.examples.setdefault(reason, [])
        examples.append((shown(word), count))
        examples.sort(key=lambda item: -item[1])
        del examples[NAMED:]


def token_encodings(bilm: BiLM, words: Sequence[str]) -> torch.Tensor:
    """The token encoder's encoding of each word (its layer 0, from its characters): (N, projection_dim)."""
    rows = []
    was_training = bilm.training
    bilm.eval()
    try:
        with torch.no_grad():
            for start in range(0, len(words), ENCODE_BATCH):
                chunk = [[word] for word in words[start : start + ENCODE_BATCH]]
                ids, _ = bilm.batch_ids(chunk, boundaries=False)
                encoded = bilm.token_encoder(torch.from_numpy(ids).to(bilm.device))
                rows.append(encoded[:, 0].float().cpu())
    finally:
        bilm.train(was_training)
    return torch.cat(rows) if rows else torch.zeros(0, bilm.config.projection_dim, device="cpu")


def fit_rows(known: torch.Tensor, rows: torch.Tensor) -> Tuple[torch.Tensor, float]:
    """Ridge regression of ``rows`` (N, k) on ``known`` encodings (N, d) with an intercept.

    RETURNS (Tuple[Tensor, float]): the map (d + 1, k), and R^2 of the fit on the known words.
    """
    x = torch.cat([known.double(), torch.ones(known.shape[0], 1, dtype=torch.float64, device=known.device)], dim=1)
    y = rows.double()
    penalty = RIDGE * float((known.double() ** 2).mean()) * known.shape[0]
    eye = torch.eye(x.shape[1], dtype=torch.float64, device=x.device)
    eye[-1, -1] = 0.0  # the intercept is not penalized
    solution = torch.linalg.solve(x.T @ x + penalty * eye, x.T @ y)
    residual = ((x @ solution - y) ** 2).sum()
    total = ((y - y.mean(dim=0)) ** 2).sum()
    return solution, float(1.0 - residual / total) if total > 0 else 0.0


def grow_vocabulary(
    bilm: BiLM, vocab: Vocab, softmax: Dict[str, torch.Tensor], words: Sequence[Tuple[str, int]],
) -> Tuple[Vocab, Dict[str, torch.Tensor], Growth]:
    """``vocab`` with ``words`` appended, and the softmax with a row for each, fitted from the token
    encoder's encodings (module docstring).

    softmax (Dict[str, Tensor]): "weight" (V, d) and "bias" (V,), in ``vocab``'s order.
    RETURNS (Tuple[Vocab, Dict[str, Tensor], Growth]): the grown vocabulary, its softmax (new tensors),
        and what was done.
    """
    old = len(vocab)
    new_words = [word for word, _ in words if word not in vocab.index]
    counts = [count for word, count in words if word not in vocab.index]
    weight, bias = softmax["weight"].detach().float(), softmax["bias"].detach().float()
    if not new_words:
        return vocab, {"weight": weight.clone(), "bias": bias.clone()}, Growth([], [], old, 0.0)
    known_words = vocab.tokens[len(SPECIALS):]
    known = token_encodings(bilm, known_words)
    targets = torch.cat([weight[len(SPECIALS):], bias[len(SPECIALS):, None]], dim=1)
    solution, r2 = fit_rows(known, targets)
    fresh = token_encodings(bilm, new_words).double()
    predicted = (torch.cat([fresh, torch.ones(fresh.shape[0], 1, dtype=torch.float64, device=fresh.device)], dim=1) @ solution).float()
    grown = Vocab(known_words + new_words)
    return grown, {
        "weight": torch.cat([weight, predicted[:, :-1]]).contiguous(),
        "bias": torch.cat([bias, predicted[:, -1]]).contiguous(),
    }, Growth(new_words, counts, old, r2)
