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
"""
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Sequence, Tuple

import torch

from ..bilm import BiLM
from .counting import TokenCounts
from .vocab import SPECIALS, Vocab

# words encoded at a time (token encoder memory: words x max_chars x filters)
ENCODE_BATCH = 2048
# the ridge penalty of the fit, relative to the mean squared encoding (keeps it stable for a few words)
RIDGE = 1e-3


@dataclass
class Growth:
    """What ``grow_vocabulary`` did: the words added with their counts, the fit's quality."""

    words: List[str]
    counts: List[int]
    old_size: int
    fit_r2: float

    def to_dict(self) -> Dict[str, object]:
        return {"added": len(self.words), "old_size": self.old_size, "new_size": self.old_size + len(self.words),
                "fit_r2": self.fit_r2, "first_words": self.words[:20]}


def domain_words(
    segments: Iterable[Sequence[str]], vocab: Vocab, *, limit: int, min_count: int,
) -> List[Tuple[str, int]]:
    """The ``limit`` most frequent words of ``segments`` outside ``vocab`` seen at least ``min_count``
    times (ties by first seen), counted in bounded memory (``counting.TokenCounts``).

    RETURNS (List[Tuple[str, int]]): (word, count), most frequent first.
    """
    if limit <= 0:
        return []
    with tempfile.TemporaryDirectory(prefix="spacy-elmo-domain-words-") as folder:
        counts = TokenCounts(Path(folder))
        for tokens in segments:
            counts.update([token for token in tokens if token not in vocab.index])
        kept = counts.vocab(size=limit + len(SPECIALS), min_count=min_count)
        words = kept.tokens[len(SPECIALS):]
        found = {word: count for word, count, _ in counts._merged() if word in kept.index}
    return [(word, found[word]) for word in words]


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
