"""From a corpus stream to language-model batches: length-bucketed sentences or fixed windows.

Both generators are deterministic functions of (seed, epoch, shard), so a resumed
run replays an epoch and skips the batches it already trained on. Memory is
bounded by ``buffer_size`` segments.
"""
from dataclasses import dataclass
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ..bilm import batch_char_ids, plan_batches, sentence_char_ids
from ..bilm.chars import BOS_TOKEN, EOS_TOKEN
from .corpus import Corpus, CorpusStats, split_long
from .vocab import Vocab

NO_TARGET = -1


@dataclass
class LMBatch:
    """One step's input.

    char_ids (ndarray): (B, T, max_chars) int64, 0 rows for padding.
    lengths (ndarray): (B,) positions per row.
    forward_targets (ndarray): (B, T) id of the next token, NO_TARGET where there is none.
    backward_targets (ndarray): (B, T) id of the previous token, NO_TARGET where there is none.
    carry_state (bool): the forward LSTM starts from the previous batch's final state (windows).
    """

    char_ids: np.ndarray
    lengths: np.ndarray
    forward_targets: np.ndarray
    backward_targets: np.ndarray
    carry_state: bool = False

    @property
    def n_targets(self) -> int:
        """Predicted tokens per direction (equal for both in sentence batches)."""
        return int((self.forward_targets != NO_TARGET).sum())


# a model's ids of sentences with their boundaries (``BiLM.batch_ids``): (ids, lengths)
BatchIds = Callable[[Sequence[Sequence[str]]], Tuple[np.ndarray, np.ndarray]]


def sentence_batch(
    sentences: Sequence[Sequence[str]], vocab: Vocab, max_chars: int, *, batch_ids: Optional[BatchIds] = None
) -> LMBatch:
    """<S> w1..wn </S> per row; forward predicts w1..</S>, backward <S>..wn.

    batch_ids (Optional[BatchIds]): the model's ids (``BiLM.batch_ids``: a learned character
        vocabulary's, for an imported ELMoForManyLangs model); default: byte ids at ``max_chars``.
    """
    if batch_ids is None:
        char_ids, lengths = batch_char_ids(sentences, max_chars, boundaries=True)
    else:
        char_ids, lengths = batch_ids(sentences)
    forward = np.full(char_ids.shape[:2], NO_TARGET, dtype=np.int64)
    backward = np.full(char_ids.shape[:2], NO_TARGET, dtype=np.int64)
    for row, tokens in enumerate(sentences):
        ids = vocab.encode(tokens, boundaries=True)
        forward[row, : len(ids) - 1] = ids[1:]
        backward[row, 1 : len(ids)] = ids[:-1]
    return LMBatch(char_ids, lengths, forward, backward)


def epoch_segments(
    corpus: Corpus,
    *,
    seed: int,
    epoch: int,
    max_tokens: int,
    shard: int = 0,
    n_shards: int = 1,
    stats: Optional[CorpusStats] = None,
    shuffle_files: bool = True,
) -> Iterator[List[str]]:
    """The segments of one epoch: files in a seeded order, long segments cut to ``max_tokens``."""
    order = list(range(len(corpus.files)))
    if shuffle_files:
        np.random.default_rng([seed, epoch]).shuffle(order)
    files = [corpus.files[i] for i in order]
    segments = corpus.segments(stats if stats is not None else CorpusStats(), files=files, shard=shard, n_shards=n_shards)
    return split_long(segments, max_tokens)


def _buffers(segments: Iterator[List[str]], size: int) -> Iterator[List[List[str]]]:
    buffer: List[List[str]] = []
    for tokens in segments:
        buffer.append(tokens)
        if len(buffer) >= size:
            yield buffer
            buffer = []
    if buffer:
        yield buffer


def sentence_batches(
    segments: Iterator[List[str]],
    vocab: Vocab,
    *,
    seed: int,
    epoch: int,
    batch_size: int,
    max_batch_tokens: Optional[int],
    buffer_size: int,
    max_chars: int,
    shuffle: bool = True,
    batch_ids: Optional[BatchIds] = None,
) -> Iterator[LMBatch]:
    """Length-bucketed batches: each buffer of segments is planned by length, then its batches
    shuffled. batch_ids: see ``sentence_batch``."""
    for k, buffer in enumerate(_buffers(segments, buffer_size)):
        rng = np.random.default_rng([seed, epoch, k])
        if shuffle:
            # a random order first, so sentences of equal length do not batch in file order
            buffer = [buffer[i] for i in rng.permutation(len(buffer))]
        lengths = [len(s) + 2 for s in buffer]
        plan = plan_batches(lengths, batch_size=batch_size, max_batch_items=max_batch_tokens)
        if shuffle:
            plan = [plan[i] for i in rng.permutation(len(plan))]
        for indices in plan:
            yield sentence_batch([buffer[i] for i in indices], vocab, max_chars, batch_ids=batch_ids)


def window_batches(
    segments: Iterator[List[str]],
    vocab: Vocab,
    *,
    seed: int,
    epoch: int,
    batch_size: int,
    unroll_steps: int,
    buffer_size: int,
    max_chars: int,
) -> Iterator[LMBatch]:
    """bilm-tf's layout: ``batch_size`` rows, each a stream of shuffled sentences (<S> .. </S>), cut
    into windows of ``unroll_steps`` tokens; the forward state is carried from one window to the next.

    The epoch ends when a row cannot fill a whole window (the tail, < rows x window tokens, is dropped).
    """
    shuffled = _shuffled(segments, seed=seed, epoch=epoch, buffer_size=buffer_size)
    rows: List[List[str]] = [[] for _ in range(batch_size)]
    previous: List[Optional[str]] = [None] * batch_size
    while True:
        for row in rows:
            while len(row) < unroll_steps + 1:
                tokens = next(shuffled, None)
                if tokens is None:
                    return
                row.extend([BOS_TOKEN, *tokens, EOS_TOKEN])
        char_ids = np.zeros((batch_size, unroll_steps, max_chars), dtype=np.int64)
        forward = np.empty((batch_size, unroll_steps), dtype=np.int64)
        backward = np.empty((batch_size, unroll_steps), dtype=np.int64)
        for r, row in enumerate(rows):
            window = row[: unroll_steps + 1]
            # literal <S>/</S> map to the boundary character ids
            char_ids[r] = sentence_char_ids(window[:unroll_steps], max_chars, boundaries=False)
            ids = vocab.encode(window, boundaries=False)
            forward[r] = ids[1:]
            backward[r, 1:] = ids[: unroll_steps - 1]
            backward[r, 0] = NO_TARGET if previous[r] is None else vocab.index.get(previous[r], vocab.unk)
            previous[r] = window[unroll_steps - 1]
            del row[:unroll_steps]
        lengths = np.full(batch_size, unroll_steps, dtype=np.int64)
        yield LMBatch(char_ids, lengths, forward, backward, carry_state=True)


def _shuffled(segments: Iterator[List[str]], *, seed: int, epoch: int, buffer_size: int) -> Iterator[List[str]]:
    for k, buffer in enumerate(_buffers(segments, buffer_size)):
        rng = np.random.default_rng([seed, epoch, k])
        for i in rng.permutation(len(buffer)):
            yield buffer[i]
