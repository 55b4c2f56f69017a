"""Lexical substitutes: the words the biLM's own softmax expects at each position of a sentence.

For a sentence w1 .. wn, run as ``<S> w1 .. wn </S>`` from a zero state, position i gets three
lists of the ``top`` most probable words of the head's vocabulary:

- forward: p(w | w1 .. w(i-1)), the forward LM's top layer at the position before i (at <S> for w1);
- backward: p(w | w(i+1) .. wn), the backward LM's top layer at the position after i (at </S> for wn);
- combined: ranked by the mean of the two log-probabilities, (log p_fwd(w) + log p_bwd(w)) / 2, as
  LAMA's ELMo connector combines them (its ``avg_log_probs``); its ``prob`` is exp of that mean,
  the geometric mean of the two probabilities, not renormalized over the vocabulary.

Each word's probability is the full softmax over the whole vocabulary (normalized chunk by chunk:
``WordSoftmax.top_log_probs``). Substitutes are words by default: ``NOT_WORDS`` (``<S>``, ``</S>``
and ``<UNK>``) are not offered but stay in the normalizer. simple_elmo's ``get_elmo_substitutes``
drops the boundaries too; ``<UNK>`` pools the probability of every rare word, so it often ranks
first while being no word a reader could put in the sentence (the sense induction of ``senses.py``
leaves it out for the same reason). ``exclude=()`` offers every entry, as bilm-tf's graph ranks them. simple_elmo reports forward and backward lists
only, with raw logits; here both carry log-probabilities.
"""
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from ..bilm import BiLM
from ..bilm.chars import BOS_TOKEN, EOS_TOKEN
from ..io.lm_head import UNK_TOKEN, LMHead

DIRECTIONS = ("forward", "backward", "combined")
# the vocabulary entries never offered by default: the sentence boundaries and the rare-word class
NOT_WORDS = (BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)


@dataclass(frozen=True)
class Substitute:
    """word (str): a vocabulary word. log_prob (float): its log-probability (combined: the mean
    of the two directions')."""

    word: str
    log_prob: float

    def to_dict(self) -> Dict[str, Any]:
        return {"word": self.word, "log_prob": self.log_prob, "prob": float(torch.tensor(self.log_prob).exp())}


@dataclass(frozen=True)
class TokenSubstitutes:
    """The substitutes of one token.

    token (str): the token as given. position (int): its index in the sentence.
    forward, backward, combined (Tuple[Substitute, ...]): best first.
    """

    token: str
    position: int
    forward: Tuple[Substitute, ...]
    backward: Tuple[Substitute, ...]
    combined: Tuple[Substitute, ...]

    def to_dict(self) -> Dict[str, Any]:
        record: Dict[str, Any] = {"position": self.position, "token": self.token}
        record.update({name: [s.to_dict() for s in getattr(self, name)] for name in DIRECTIONS})
        return record


def sentence_substitutes(
    bilm: BiLM,
    head: LMHead,
    sentences: Sequence[Sequence[str]],
    *,
    top: int = 5,
    exclude: Sequence[str] = NOT_WORDS,
    batch_size: int = 32,
) -> List[List[TokenSubstitutes]]:
    """The substitutes of every token of every sentence (see the module docstring).

    bilm (BiLM): the model (as it is: its runner decides the path, the plain one being exact).
    head (LMHead): its softmax and vocabulary (a model source's ``head()``, ``io.loading.load_lm_head``).
    sentences (Sequence[Sequence[str]]): tokenized sentences.
    top (int): words per list.
    exclude (Sequence[str]): entries never offered (they still count in the normalizer); default
        ``NOT_WORDS`` (<S>, </S>, <UNK>): words only; () offers every entry.
    batch_size (int): sentences per biLM pass.
    RETURNS (List[List[TokenSubstitutes]]): per sentence, per token.
    """
    head.check_fits(bilm)
    excluded = sorted({head.index[w] for w in exclude if w in head.index})
    if top < 1:
        raise ValueError(f"top must be at least 1, not {top}")
    top = min(top, len(head) - len(excluded))
    width = bilm.config.projection_dim
    results: List[List[TokenSubstitutes]] = []
    was_training = bilm.training
    bilm.eval()
    try:
        with torch.no_grad():
            for start in range(0, len(sentences), batch_size):
                batch = [list(s) for s in sentences[start : start + batch_size]]
                ids, lengths = bilm.batch_ids(batch)
                layer = bilm(torch.from_numpy(ids).to(bilm.device), torch.from_numpy(lengths)).layers[-1]
                # the forward state before each word (<S> .. w(n-1)), the backward state after it (w2 .. </S>)
                forward = torch.cat([layer[r, : len(s), :width] for r, s in enumerate(batch)])
                backward = torch.cat([layer[r, 2 : len(s) + 2, width:] for r, s in enumerate(batch)])
                lists = [head.softmax.top_log_probs(h, top, exclude=excluded)
                         for h in (forward[None], backward[None], torch.stack([forward, backward]))]
                offset = 0
                for sentence in batch:
                    results.append([
                        TokenSubstitutes(token, i, *(_substitutes(head, values[offset + i], ids_[offset + i])
                                                     for values, ids_ in lists))
                        for i, token in enumerate(sentence)
                    ])
                    offset += len(sentence)
    finally:
        bilm.train(was_training)
    return results


def _substitutes(head: LMHead, values: torch.Tensor, ids: torch.Tensor) -> Tuple[Substitute, ...]:
    return tuple(Substitute(head.words[int(i)], float(v)) for v, i in zip(values, ids))


def doc_substitutes(
    doc: Any, bilm: BiLM, head: LMHead, *, top: int = 5, exclude: Sequence[str] = NOT_WORDS
) -> List[Optional[TokenSubstitutes]]:
    """The substitutes of a spaCy Doc's tokens, sentence by sentence where the Doc has sentence
    boundaries (else the whole Doc as one sentence); whitespace tokens are not read.

    doc (Doc): the Doc.
    bilm (BiLM): e.g. ``nlp.get_pipe("elmo").bilm``.
    head (LMHead): the softmax of the model the component was initialized from (``load_lm_head``).
    top (int): words per list.
    exclude (Sequence[str]): entries never offered, as ``sentence_substitutes`` (default: words only).
    RETURNS (List[Optional[TokenSubstitutes]]): one per token of the Doc (None for whitespace);
        ``position`` is the token's index in the Doc.
    """
    spans = list(doc.sents) if doc.has_annotation("SENT_START") else [doc[:]]
    kept = [[t for t in span if not t.is_space] for span in spans]
    kept = [tokens for tokens in kept if tokens]
    found = sentence_substitutes(bilm, head, [[t.text for t in tokens] for tokens in kept], top=top, exclude=exclude)
    result: List[Optional[TokenSubstitutes]] = [None] * len(doc)
    for tokens, subs in zip(kept, found):
        for token, sub in zip(tokens, subs):
            result[token.i] = TokenSubstitutes(sub.token, token.i, sub.forward, sub.backward, sub.combined)
    return result
