"""Counting the training corpus in one streaming pass: the vocabulary and the batches of an epoch.

Pretraining builds its vocabulary here, and so does fine-tuning with a new softmax.
"""
import heapq
import json
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from ..files import write_atomic
from ..bilm import plan_batches
from ..records.provenance import data_record, provenance
from .config import LMConfig
from .corpus import Corpus, CorpusStats, UnusableCorpus, split_long
from .distributed import DistInfo, barrier
from .vocab import SPECIALS, VOCAB_NAME, Vocab

STATS_NAME = "corpus-stats.json"
# distinct words held in memory while counting; beyond them the counts go to sorted files on disk
MAX_TYPES_IN_MEMORY = 2_000_000


class TokenCounts:
    """Word counts over a stream, in bounded memory: at most ``max_types`` words in a dict, the rest
    spilled as runs sorted by word into ``folder`` and merged when the vocabulary is taken.

    Each word keeps its count and the position it was first seen at, so the vocabulary is exactly
    ``Vocab.from_counts`` of a whole Counter (most frequent first, ties by first-seen order).
    """

    def __init__(self, folder: Path, *, max_types: int = MAX_TYPES_IN_MEMORY) -> None:
        self.folder, self.max_types = folder, max_types
        self.counts: Dict[str, List[int]] = {}
        self.runs: List[Path] = []
        self.seen = 0

    def update(self, tokens: Sequence[str]) -> None:
        for word in tokens:
            entry = self.counts.get(word)
            if entry is None:
                self.counts[word] = [1, self.seen]
            else:
                entry[0] += 1
            self.seen += 1
        if len(self.counts) > self.max_types:
            self._spill()

    def _spill(self) -> None:
        path = self.folder / f"counts-{len(self.runs):05d}.jsonl"
        with open(path, "w", encoding="utf-8") as handle:
            for word in sorted(self.counts):
                handle.write(json.dumps([word, *self.counts[word]]) + "\n")
        self.runs.append(path)
        self.counts = {}

    def _merged(self) -> Iterator[Tuple[str, int, int]]:
        """Every word once, in word order: its total count and first position."""

        def run(path: Path) -> Iterator[Tuple[str, int, int]]:
            with open(path, encoding="utf-8") as handle:
                for line in handle:
                    word, count, first = json.loads(line)
                    yield word, count, first

        memory = ((word, count, first) for word, (count, first) in sorted(self.counts.items()))
        current: Optional[List] = None
        for word, count, first in heapq.merge(memory, *(run(path) for path in self.runs)):
            if current is not None and current[0] == word:
                current[1] += count
                current[2] = min(current[2], first)
                continue
            if current is not None:
                yield tuple(current)
            current = [word, count, first]
        if current is not None:
            yield tuple(current)

    def vocab(self, *, size: int, min_count: int) -> Vocab:
        """The vocabulary ``Vocab.from_counts`` gives, keeping only the best ``size`` words in memory."""
        keep = size - len(SPECIALS)
        if keep < 1:
            return Vocab.from_counts(Counter(), size=size)  # refuses the size, with its message
        best: List[Tuple[int, int, str]] = []  # a min-heap on (count, -first): its root is the weakest kept
        for word, count, first in self._merged():
            if count < min_count or word in SPECIALS:
                continue
            item = (count, -first, word)
            if len(best) < keep:
                heapq.heappush(best, item)
            elif item > best[0]:
                heapq.heapreplace(best, item)
        return Vocab([word for _, _, word in sorted(best, reverse=True)])

    @property
    def distinct(self) -> int:
        """Words counted, across memory and the spilled runs (for tests and logs)."""
        return sum(1 for _ in self._merged())


def count_tokens(segments: Iterable[Sequence[str]], counts: TokenCounts) -> TokenCounts:
    """Count the words of ``segments`` into ``counts``. RETURNS (TokenCounts): ``counts``."""
    for tokens in segments:
        counts.update(tokens)
    return counts


@dataclass
class CorpusCount:
    """What one streaming pass over the training corpus found (saved as corpus-stats.json)."""

    stats: CorpusStats
    vocab: Vocab
    segments: int
    batches: int

    def to_dict(self) -> dict:
        return {"stats": self.stats.to_dict(), "vocab_size": len(self.vocab), "segments": self.segments, "batches": self.batches}


def count_corpus(corpus: Corpus, config: LMConfig, *, max_types: int = MAX_TYPES_IN_MEMORY) -> CorpusCount:
    """Token counts (for the vocabulary) and the number of batches of an epoch, in one pass.

    The batch count plans the same length buckets as training, from lengths only, so steps and
    ETA follow from the data rather than from a constant. Memory holds at most ``max_types``
    distinct words (``TokenCounts``; the rest in a temporary folder) and one buffer of lengths.
    """
    stats = CorpusStats()
    settings = config.training
    segments, batches = 0, 0
    lengths: List[int] = []

    def pieces() -> Iterable[List[str]]:
        nonlocal segments, batches
        for tokens in split_long(corpus.segments(stats), config.corpus.max_sentence_tokens):
            segments += 1
            lengths.append(len(tokens) + 2)
            if len(lengths) >= config.corpus.buffer_size:
                batches += _n_batches(lengths, settings)
                lengths.clear()
            yield tokens

    with tempfile.TemporaryDirectory(prefix="spacy-elmo-counts-") as folder:
        counts = count_tokens(pieces(), TokenCounts(Path(folder), max_types=max_types))
        vocab = counts.vocab(size=config.vocab.size, min_count=config.vocab.min_count)
    batches += _n_batches(lengths, settings) if lengths else 0
    if settings.mode == "windows":
        batches = (stats.tokens + 2 * segments) // (settings.batch_size * settings.unroll_steps)
    return CorpusCount(stats=stats, vocab=vocab, segments=segments, batches=batches)


def _n_batches(lengths: List[int], settings) -> int:
    return len(plan_batches(lengths, batch_size=settings.batch_size, max_batch_items=settings.max_batch_tokens))


def prepare_vocab(corpus: Corpus, config: LMConfig, output: Path, info: DistInfo, *, resume: bool, log) -> tuple:
    """Count the corpus on rank 0 (or read the counts a resumed run saved) and share them by file.

    Fine-tuning with a new softmax builds its vocabulary here too.
    """
    stats_path = output / STATS_NAME
    if info.is_main and not (resume and stats_path.is_file() and (output / VOCAB_NAME).is_file()):
        counted = count_corpus(corpus, config)
        counted.vocab.to_disk(output)
        record = {**counted.to_dict(), "provenance": provenance(
            model=None, model_note="counting a corpus reads no model", data=data_record(corpus.files))}
        write_atomic(stats_path, json.dumps(record, indent=2).encode("utf-8"))
        log(f"corpus: {counted.stats.summary()}; {counted.segments} segments, vocabulary {len(counted.vocab)}")
    barrier(info)
    saved = json.loads(stats_path.read_text(encoding="utf-8"))
    if saved["vocab_size"] <= len(SPECIALS):  # every rank refuses, so none waits for the others
        raise UnusableCorpus(
            f"no usable training corpus: no word is seen [vocab] min_count = {config.vocab.min_count} times or more "
            f"({saved['stats']['tokens']} tokens), so the vocabulary would hold only {', '.join(SPECIALS)}; "
            "give more text or lower the minimum"
        )
    return Vocab.from_disk(output), saved
