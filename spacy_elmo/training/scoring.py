"""A biLM with its own softmax as a language model in Python: ``load_lm(SOURCE)``.

``ElmoLM`` scores tokenized sentences three ways, all with the full softmax and no dropout:

- ``perplexity(sentences, carry_state=...)``: forward, backward and mean perplexity (``Perplexity``),
  fresh (each sentence from a zero LSTM state, the default) or carried (the sentences in order form
  one stream, as bilm-tf's ``test`` runs it); the ``evaluate`` command calls it;
- ``logprobs(sentences, carry_state=...)``: every token's log-probability in both directions
  (``SentenceLogProbs``), for scoring, LAMA-style probing and surprisal studies;
- ``substitutes(sentences, ...)``: the words the LM expects at each token (``usage`` substitutes);
  the ``substitutes`` command calls it.

The row convention of ``logprobs``: a sentence w1 .. wn is read as ``<S> w1 .. wn </S>``; both
arrays have n + 1 entries in sentence order. ``forward[i]`` is log p(t(i+1) | t0 .. ti) for the
targets t1 .. t(n+1) = w1 .. wn, </S>: the forward LM's prediction of each word from its left
context, ending with </S>. ``backward[i]`` is log p(t(i) | t(i+1) .. t(n+1)) for the targets
t0 .. tn = <S>, w1 .. wn: the backward LM's prediction of each word from its right context,
starting with <S>. (bilm-tf's ``test`` lists the backward NLLs in reading order, wn .. w1, <S>:
``backward[::-1]``.) Words outside the softmax's vocabulary are scored as ``<UNK>``.
"""
from dataclasses import dataclass, replace
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from ..bilm.batching import windows
from ..io.lm_head import LMHead
from ..io.loading import PathLike
from ..usage.substitutes import NOT_WORDS, TokenSubstitutes, sentence_substitutes
from .batches import sentence_batch
from .head import load_scoring_lm
from .lm import LanguageModel
from .perplexity import Perplexity, carried_outputs, evaluate_perplexity
from .vocab import Vocab


@dataclass(frozen=True)
class SentenceLogProbs:
    """One sentence's token log-probabilities (natural log; see the module docstring for the rows).

    tokens (Tuple[str, ...]): the sentence as given, without boundaries.
    forward (ndarray): (n + 1,) float32, log p of w1 .. wn, </S> from their left context.
    backward (ndarray): (n + 1,) float32, log p of <S>, w1 .. wn from their right context.
    """

    tokens: Tuple[str, ...]
    forward: np.ndarray
    backward: np.ndarray

    @property
    def words(self) -> np.ndarray:
        """RETURNS (ndarray): (n,) the mean of each word's two log-probabilities (boundaries left out)."""
        return 0.5 * (self.forward[:-1] + self.backward[1:])


class ElmoLM:
    """A biLM and its softmax as a language model (``load_lm``)."""

    def __init__(self, lm: LanguageModel, vocab: Vocab, head: LMHead) -> None:
        self.lm = lm
        self.vocab = vocab
        self.head = head

    @property
    def bilm(self):
        return self.lm.bilm

    def perplexity(
        self, sentences: Iterable[Sequence[str]], *, carry_state: bool = False, batch_size: int = 64
    ) -> Perplexity:
        """Forward, backward and mean perplexity of tokenized sentences, read as they stream.

        sentences (Iterable[Sequence[str]]): e.g. a list of token lists, or a generator over a corpus.
        carry_state (bool): one stream, each sentence starting from the state the previous ended in.
        RETURNS (Perplexity): its ``n_forward`` counts the predictions (n + 1 per sentence).
        """
        if isinstance(sentences, str):
            raise TypeError(TOKENIZED)
        result = evaluate_perplexity(self.lm, _checked(sentences), self.vocab, batch_size=batch_size,
                                     carry_state=carry_state)
        if result.n_forward == 0:
            raise ValueError("no sentences: there is nothing to score")
        return result

    def logprobs(
        self, sentences: Sequence[Sequence[str]], *, carry_state: bool = False, batch_size: int = 64
    ) -> List[SentenceLogProbs]:
        """Every token's log-probability in both directions (the row convention: module docstring).

        carry_state (bool): as ``perplexity``.
        RETURNS (List[SentenceLogProbs]): one per sentence, in order.
        """
        _check_sentences(sentences)
        sentences = [list(s) for s in sentences]
        was_training = self.lm.training
        self.lm.eval()
        try:
            if carry_state:
                outputs = carried_outputs(self.lm, sentences, self.vocab)
                return [_sentence(tokens, out["forward_token_nll"], out["backward_token_nll"])
                        for tokens, out in zip(sentences, outputs)]
            return self._fresh_logprobs(sentences, batch_size)
        finally:
            self.lm.train(was_training)

    def _fresh_logprobs(self, sentences: List[List[str]], batch_size: int) -> List[SentenceLogProbs]:
        bilm = self.lm.bilm
        batch_ids = None if bilm.char_vocab is None else bilm.batch_ids
        found: List[SentenceLogProbs] = []
        with torch.no_grad():
            for start in range(0, len(sentences), batch_size):
                batch = sentences[start : start + batch_size]
                out = self.lm.run_batch(sentence_batch(batch, self.vocab, bilm.config.max_characters_per_token,
                                                       batch_ids=batch_ids))
                # the kept targets in row-major order: n + 1 a sentence in each direction
                ends = np.cumsum([len(tokens) + 1 for tokens in batch])[:-1]
                forward = np.split(out["forward_token_nll"].cpu().numpy(), ends)
                backward = np.split(out["backward_token_nll"].cpu().numpy(), ends)
                found += [_sentence(tokens, f, b) for tokens, f, b in zip(batch, forward, backward)]
        return found

    def substitutes(
        self,
        sentences: Sequence[Sequence[str]],
        *,
        top: int = 5,
        exclude: Sequence[str] = NOT_WORDS,
        batch_size: int = 32,
    ) -> List[List[TokenSubstitutes]]:
        """The words the LM expects at each token: forward, backward and combined lists.

        top (int): words per list.
        exclude (Sequence[str]): entries never offered (they still count in the normalizer); default
            ``usage.substitutes.NOT_WORDS`` (<S>, </S>, <UNK>): words only; () offers every entry, as
            bilm-tf's graph ranks them.
        batch_size (int): sentences (windows) per biLM pass.
        RETURNS (List[List[TokenSubstitutes]]): per sentence, per token. A sentence longer than
            ``bilm.batching.MAX_WINDOW`` tokens runs in windows, as the elmo component runs it.
        """
        _check_sentences(sentences)
        pieces = [(i, begin, end) for i, s in enumerate(sentences) for begin, end in windows(0, len(s))]
        found = sentence_substitutes(self.lm.bilm, self.head, [list(sentences[i][b:e]) for i, b, e in pieces], top=top,
                                     exclude=exclude, batch_size=batch_size)
        joined: List[List[TokenSubstitutes]] = [[] for _ in sentences]
        for (i, begin, _), tokens in zip(pieces, found):
            joined[i].extend(replace(token, position=token.position + begin) for token in tokens)
        return joined


def load_lm(
    model: Optional[PathLike] = None,
    *,
    options: Optional[PathLike] = None,
    weights: Optional[PathLike] = None,
    chunk_size: Optional[int] = None,
    device: Union[str, torch.device] = "cpu",
) -> ElmoLM:
    """A model with its own softmax as a language model.

    model (Optional[PathLike]): anything ``load_bilm`` takes that has a softmax: our directory (a
        pretrain or finetune output, or the shipped biLM when None), a folder or zip holding a published
        pair with its softmax and vocabulary, a bilm-tf checkpoint or NLPL entry with one, or a
        published name whose softmax was published (``original``).
    options (Optional[PathLike]), weights (Optional[PathLike]): a published pair given as its two
        files instead of ``model`` (its softmax.hdf5 and vocabulary beside the weights).
    chunk_size (Optional[int]): softmax rows normalized at a time (memory: tokens x rows).
    device (Union[str, torch.device]): where it runs ("cpu", "cuda"); results come back as numpy
        arrays and floats wherever it ran.
    RETURNS (ElmoLM): the language model, in eval mode.
    """
    lm, vocab, head = load_scoring_lm(model, options=options, weights=weights, what="load_lm")
    lm.to(device)
    head.softmax.to(device)  # the head's own rows (the order its words are in), for substitutes
    if chunk_size is not None:
        lm.softmax.chunk_size = chunk_size
    lm.eval()
    return ElmoLM(lm, vocab, head)


TOKENIZED = "give tokenized sentences: a list of lists of strings, e.g. [['The', 'bank', '.']]"


def _check_sentences(sentences: Sequence[Sequence[str]]) -> None:
    if isinstance(sentences, str):
        raise TypeError(TOKENIZED)
    if len(sentences) == 0:
        raise ValueError("no sentences: there is nothing to score")
    for _ in _checked(sentences):
        pass


def _checked(sentences: Iterable[Sequence[str]]) -> Iterator[List[str]]:
    for i, sentence in enumerate(sentences):
        if isinstance(sentence, str) or not all(isinstance(token, str) for token in sentence):
            raise TypeError(TOKENIZED)
        if len(sentence) == 0:
            raise ValueError(f"sentence {i} has no tokens: there is nothing to score")
        yield list(sentence)


def _sentence(tokens: Sequence[str], forward_nll: torch.Tensor, backward_nll: torch.Tensor) -> SentenceLogProbs:
    def logprobs(nll) -> np.ndarray:
        values = nll.cpu().numpy() if isinstance(nll, torch.Tensor) else nll
        return (-np.asarray(values, dtype=np.float32)).copy()

    return SentenceLogProbs(tuple(tokens), logprobs(forward_nll), logprobs(backward_nll))
