"""Exact held-out perplexity of both directions, with the full softmax.

Each segment is scored as its own sentence ``<S> w1 .. wn </S>`` from a zero
state (the way the biLM is used downstream): the forward LM predicts w1 .. </S>,
the backward LM <S> .. wn, so each direction makes n + 1 predictions. Words
outside the softmax vocabulary are predicted as ``<UNK>`` (reported as the OOV
rate, since perplexities over different vocabularies are not comparable).
"""
import math
from dataclasses import dataclass
from itertools import islice
from typing import Dict, Iterable, List, Optional, Tuple

import torch

from .batches import sentence_batches
from .corpus import Corpus, CorpusStats, split_long
from .lm import LanguageModel
from .vocab import Vocab


@dataclass
class Perplexity:
    forward_nll: float = 0.0
    backward_nll: float = 0.0
    n_forward: int = 0
    n_backward: int = 0
    n_words: int = 0
    n_oov: int = 0

    @property
    def forward(self) -> float:
        return math.exp(self.forward_nll / max(self.n_forward, 1))

    @property
    def backward(self) -> float:
        return math.exp(self.backward_nll / max(self.n_backward, 1))

    @property
    def loss(self) -> float:
        """Mean of the two directions' mean NLL (what training minimizes)."""
        return 0.5 * (self.forward_nll / max(self.n_forward, 1) + self.backward_nll / max(self.n_backward, 1))

    @property
    def mean(self) -> float:
        """Geometric mean of the forward and backward perplexities."""
        return math.exp(self.loss)

    def to_dict(self) -> Dict[str, float]:
        return {
            "forward_ppl": self.forward,
            "backward_ppl": self.backward,
            "ppl": self.mean,
            "loss": self.loss,
            "tokens": self.n_forward,
            "oov_rate": self.n_oov / max(self.n_words, 1),
        }


def evaluate_perplexity(
    lm: LanguageModel,
    segments: Iterable[List[str]],
    vocab: Vocab,
    *,
    batch_size: int = 64,
    max_batch_tokens: Optional[int] = 4096,
    buffer_size: int = 4096,
) -> Perplexity:
    """Score every segment (run in eval mode: no dropout, full softmax)."""
    result = Perplexity()
    was_training = lm.training
    lm.eval()

    def counted(stream: Iterable[List[str]]) -> Iterable[List[str]]:
        for tokens in stream:
            result.n_words += len(tokens)
            result.n_oov += sum(1 for t in tokens if t not in vocab.index)
            yield tokens

    batches = sentence_batches(
        iter(counted(segments)),
        vocab,
        seed=0,
        epoch=0,
        batch_size=batch_size,
        max_batch_tokens=max_batch_tokens,
        buffer_size=buffer_size,
        max_chars=lm.bilm.config.max_characters_per_token,
        shuffle=False,
        batch_ids=None if lm.bilm.char_vocab is None else lm.bilm.batch_ids,
    )
    try:
        with torch.no_grad():
            for batch in batches:
                out = lm.run_batch(batch)
                result.forward_nll += float(out["forward_nll"])
                result.backward_nll += float(out["backward_nll"])
                result.n_forward += out["forward_n"]
                result.n_backward += out["backward_n"]
    finally:
        lm.train(was_training)
    return result


def corpus_perplexity(
    lm: LanguageModel,
    vocab: Vocab,
    data: str,
    *,
    fmt: str = "auto",
    tokenizer: str = "whitespace",
    max_sentence_tokens: int,
    max_segments: int = 0,
    batch_size: int = 64,
) -> Tuple[Perplexity, CorpusStats]:
    """Score held-out text read from files, directories or globs (comma-separated), each line a sentence.

    max_sentence_tokens (int): longer lines are cut into pieces of this length (use the model's own).
    max_segments (int): score only the first N segments (0: all).
    RETURNS (Tuple[Perplexity, CorpusStats]): the perplexity and what was read.
    """
    corpus = Corpus(data, fmt=fmt, tokenizer=tokenizer)
    stats = CorpusStats()
    segments = split_long(corpus.segments(stats), max_sentence_tokens)
    return evaluate_perplexity(lm, islice(segments, max_segments or None), vocab, batch_size=batch_size), stats
