"""A biLM's head (``io.lm_head.LMHead``: ours or a published one) as training's vocabulary and
softmax, and the language model of any model that has a head, for scoring text.

Training's ``Vocab`` keeps ``<S>``, ``</S>`` and ``<UNK>`` at ids 0, 1, 2 and the other words in
their order; a published vocabulary may list the three elsewhere, so the head's rows are put in
the same order (in place: a published softmax is not copied).
"""
from typing import Dict, Optional, Tuple

import torch

from ..bilm.softmax import WordSoftmax
from ..io.lm_head import LMHead
from ..io.loading import PathLike, load_lm_head
from .lm import LanguageModel
from .vocab import Vocab


def head_vocab(head: LMHead) -> Tuple[Vocab, Dict[str, torch.Tensor]]:
    """Put the head in training's vocabulary order, in place, and give that vocabulary.

    Only the rows up to the last one that moves are copied (for a vocabulary that starts
    ``</S>``, ``<S>``, ``<UNK>``, two rows), not the whole 1.6 GB of a published softmax; the head's
    ``words`` follow its rows.
    RETURNS (Tuple[Vocab, Dict[str, torch.Tensor]]): the vocabulary and the softmax's state dict (the
        head's own tensors).
    """
    vocab = Vocab(head.words)
    if list(vocab.tokens) != list(head.words):
        order = torch.tensor([head.index[word] for word in vocab.tokens], dtype=torch.long)
        moved = int((order != torch.arange(len(order))).nonzero().max()) + 1
        with torch.no_grad():
            for tensor in (head.softmax.weight, head.softmax.bias):
                tensor[:moved] = tensor[order[:moved]]  # indexing copies the rows first
        head.words = tuple(vocab.tokens)
        head.index = dict(vocab.index)
    return vocab, {"weight": head.softmax.weight.detach(), "bias": head.softmax.bias.detach()}


def head_softmax(head: LMHead, *, n_samples: int = 0) -> Tuple[Vocab, WordSoftmax]:
    """RETURNS (Tuple[Vocab, WordSoftmax]): ``head_vocab``'s vocabulary and a softmax holding its rows
    (sampled while training when ``n_samples`` > 0 and below the vocabulary size)."""
    vocab, state = head_vocab(head)
    return vocab, WordSoftmax.from_weights(state["weight"], state["bias"], n_samples=n_samples)


def load_scoring_lm(
    model: Optional[PathLike] = None, *, options: Optional[PathLike] = None, weights: Optional[PathLike] = None,
    what: str = "evaluate",
) -> Tuple[LanguageModel, Vocab, LMHead]:
    """The language model of ``model`` (anything ``locate_bilm`` takes: our directory, a folder or
    zip with a published pair, softmax and vocabulary, a published name whose softmax was published;
    none: the shipped biLM) with its own softmax, full, no dropout (``io.loading.load_lm_head``).

    RETURNS (Tuple[LanguageModel, Vocab, LMHead]): the model, its vocabulary, and the head as read.
    """
    bilm, head = load_lm_head(model, options=options, weights=weights, what=what)
    vocab, softmax = head_softmax(head)
    return LanguageModel(bilm, softmax), vocab, head
