"""Exact held-out perplexity of both directions, with the full softmax.

Each segment is scored as a sentence ``<S> w1 .. wn </S>``: the forward LM predicts w1 .. </S>
from the states at <S> .. wn, the backward LM <S> .. wn from the states at w1 .. </S>, so each
direction makes n + 1 predictions. Words outside the softmax vocabulary are predicted as
``<UNK>`` (reported as the OOV rate, since perplexities over different vocabularies are not
comparable). A vocabulary larger than the softmax's ``chunk_size`` is normalized chunk by chunk
(``WordSoftmax.log_normalizer``), so the published 793,471-word softmax fits in memory.

Two definitions of the LSTM state a sentence starts from:

- fresh (the default): every sentence from a zero state, the way the biLM is used downstream;
- carried (``carry_state``): the sentences in order form one stream, as bilm-tf's ``test`` runs
  it (batch 1): the forward LM reads <S> w1 .. wn of each sentence in turn (its </S> is only
  predicted, never read), each sentence starting from the state the previous one ended in; the
  backward LM reads </S> wn .. w1 of each sentence in turn, likewise. The first sentence starts
  from a zero state in both definitions.
"""
import math
from dataclasses import dataclass
from itertools import islice
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

import numpy as np
import torch

from ..bilm import BiLMState
from .batches import NO_TARGET, LMBatch, sentence_batches
from .corpus import Corpus, CorpusStats, split_long
from .lm import LanguageModel
from .vocab import Vocab


# a held-out text with at least this share of its tokens outside the vocabulary gets a warning: each
# such token is scored as <UNK>, an easy prediction, so the perplexity reads lower than the text is hard
OOV_WARN = 0.10


class AllOutOfVocabulary(ValueError):
    """Every token of a held-out text is outside the vocabulary: its perplexity would be <UNK>'s alone."""


def oov_rate_checked(n_oov: int, n_words: int, *, what: str = "the text") -> float:
    """RETURNS (float): the OOV rate; raises ``AllOutOfVocabulary`` when every token is out of
    vocabulary, and ValueError when there is no token at all."""
    if n_words == 0:
        raise ValueError(f"{what}: no tokens to score")
    if n_oov >= n_words:
        raise AllOutOfVocabulary(
            f"{what}: all {n_words} tokens are outside the model's vocabulary, so every one would be scored as <UNK>: "
            "no perplexity from that (is it the language and tokenization the model was trained on?)"
        )
    return n_oov / n_words


def oov_warning(rate: float, *, what: str = "the text") -> Optional[str]:
    """RETURNS (Optional[str]): a warning where ``rate`` is ``OOV_WARN`` or more, else None."""
    if rate < OOV_WARN:
        return None
    return (f"warning: {what}: {100 * rate:.1f}% of its tokens are outside the vocabulary (>= {100 * OOV_WARN:.0f}%): "
            "each is scored as <UNK>, an easy prediction, so the perplexity is flattered; compare it only with "
            "perplexities over the same vocabulary")


@dataclass
class Perplexity:
    forward_nll: float = 0.0
    backward_nll: float = 0.0
    n_forward: int = 0
    n_backward: int = 0
    n_words: int = 0
    n_oov: int = 0
    # the targets among a shared vocabulary's words (``evaluate_perplexity(shared=...)``)
    shared_forward_nll: float = 0.0
    shared_backward_nll: float = 0.0
    n_shared_forward: int = 0
    n_shared_backward: int = 0

    @property
    def shared(self) -> Optional[float]:
        """Geometric mean of both directions' perplexity over the shared vocabulary's words (None: not scored)."""
        if not self.n_shared_forward or not self.n_shared_backward:
            return None
        return math.exp(0.5 * (self.shared_forward_nll / self.n_shared_forward + self.shared_backward_nll / self.n_shared_backward))

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
            **({"ppl_shared": self.shared, "tokens_shared": self.n_shared_forward} if self.shared is not None else {}),
        }


def evaluate_perplexity(
    lm: LanguageModel,
    segments: Iterable[List[str]],
    vocab: Vocab,
    *,
    batch_size: int = 64,
    max_batch_tokens: Optional[int] = 4096,
    buffer_size: int = 4096,
    carry_state: bool = False,
    shared: Optional[int] = None,
) -> Perplexity:
    """Score every segment (run in eval mode: no dropout, full softmax).

    carry_state (bool): carry the LSTM state from sentence to sentence (see the module docstring;
        one sentence at a time) instead of a fresh zero state per sentence.
    shared (Optional[int]): also score (``Perplexity.shared``, "ppl_shared") only the predictions of
        words among the vocabulary's first ``shared`` ids, <UNK> left out: the perplexity over the
        words two vocabularies share, where one is the other with words added at its end
        (``training.vocab_growth``), so a model before and after its vocabulary grew is scored on
        the same predictions. The OOV rate stays ``vocab``'s.
    """
    result = Perplexity()
    was_training = lm.training
    lm.eval()

    def counted(stream: Iterable[List[str]]) -> Iterable[List[str]]:
        for tokens in stream:
            result.n_words += len(tokens)
            result.n_oov += sum(1 for t in tokens if t not in vocab.index)
            yield tokens

    if carry_state:
        return _carried_perplexity(lm, counted(segments), vocab, result, was_training)
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
    if shared is not None and carry_state:
        raise ValueError("the perplexity over a shared vocabulary is scored with a fresh state per sentence")
    try:
        with torch.no_grad():
            for batch in batches:
                out = lm.run_batch(batch)
                _add(result, out)
                if shared is not None:
                    _add_shared(result, batch, out, shared, vocab.unk)
    finally:
        lm.train(was_training)
    return result


def _add_shared(result: Perplexity, batch: LMBatch, out: Dict[str, object], shared: int, unk: int) -> None:
    """Add the NLL of the targets among the vocabulary's first ``shared`` ids, <UNK> left out."""
    for direction, targets in (("forward", batch.forward_targets), ("backward", batch.backward_targets)):
        kept = targets[targets != NO_TARGET]  # the order of the token NLLs (row-major)
        mask = torch.from_numpy((kept < shared) & (kept != unk))
        nll = out[f"{direction}_token_nll"].float().cpu()
        setattr(result, f"shared_{direction}_nll", getattr(result, f"shared_{direction}_nll") + float(nll[mask].sum()))
        setattr(result, f"n_shared_{direction}", getattr(result, f"n_shared_{direction}") + int(mask.sum()))


def _add(result: Perplexity, out: Dict[str, object]) -> None:
    result.forward_nll += float(out["forward_nll"])
    result.backward_nll += float(out["backward_nll"])
    result.n_forward += out["forward_n"]
    result.n_backward += out["backward_n"]


def _carried_perplexity(
    lm: LanguageModel, segments: Iterable[List[str]], vocab: Vocab, result: Perplexity, was_training: bool
) -> Perplexity:
    """The carried definition (module docstring), summed."""
    try:
        for out in carried_outputs(lm, segments, vocab):
            _add(result, out)
    finally:
        lm.train(was_training)
    return result


def carried_outputs(lm: LanguageModel, segments: Iterable[List[str]], vocab: Vocab) -> Iterator[Dict[str, object]]:
    """The carried definition, one sentence at a time: each sentence as two rows, ``<S> w1 .. wn``
    (read by the forward LM, predicting w1 .. </S>) and ``w1 .. wn </S>`` (read backward, predicting
    <S> .. wn), each direction starting from the state its row ended in for the previous sentence.

    RETURNS (Iterator[Dict[str, object]]): ``LanguageModel.forward``'s result for each sentence
        (its token NLLs in sentence order: forward for w1 .. </S>, backward for <S> .. wn).
    """
    carried: Optional[BiLMState] = None
    with torch.no_grad():
        for tokens in segments:
            ids, _ = lm.bilm.batch_ids([tokens])
            n = len(tokens)
            words = vocab.encode(tokens, boundaries=True)
            forward = np.full((2, n + 1), NO_TARGET, dtype=np.int64)
            backward = np.full((2, n + 1), NO_TARGET, dtype=np.int64)
            forward[0], backward[1] = words[1:], words[:-1]
            rows = np.stack([ids[0, : n + 1], ids[0, 1 : n + 2]])
            batch = LMBatch(rows, np.full(2, n + 1, dtype=np.int64), forward, backward)
            out = lm.run_batch(batch, _start_state(lm, carried))
            yield out
            (forward_state, backward_state) = out["state"]
            carried = ([(h[:1], c[:1]) for h, c in forward_state], [(h[1:], c[1:]) for h, c in backward_state])


def _start_state(lm: LanguageModel, carried: Optional[BiLMState]) -> Optional[BiLMState]:
    """Row 0's forward and row 1's backward state from ``carried``; zeros for the rows whose
    direction predicts nothing."""
    if carried is None:
        return None
    zero_forward, zero_backward = lm.bilm.zero_state(2)
    forward = [(torch.cat([h, z[0][1:]]), torch.cat([c, z[1][1:]])) for (h, c), z in zip(carried[0], zero_forward)]
    backward = [(torch.cat([z[0][:1], h]), torch.cat([z[1][:1], c])) for (h, c), z in zip(carried[1], zero_backward)]
    return forward, backward


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
    carry_state: bool = False,
) -> Tuple[Perplexity, CorpusStats]:
    """Score held-out text read from files, directories or globs (comma-separated), each line a sentence.

    max_sentence_tokens (int): longer lines are cut into pieces of this length (use the model's own).
    max_segments (int): score only the first N segments (0: all).
    carry_state (bool): the carried definition (module docstring) instead of a fresh state per sentence.
    RETURNS (Tuple[Perplexity, CorpusStats]): the perplexity and what was read.
    """
    corpus = Corpus(data, fmt=fmt, tokenizer=tokenizer)
    stats = CorpusStats()
    segments = split_long(corpus.segments(stats), max_sentence_tokens)
    segments = islice(segments, max_segments or None)
    return evaluate_perplexity(lm, segments, vocab, batch_size=batch_size, carry_state=carry_state), stats
