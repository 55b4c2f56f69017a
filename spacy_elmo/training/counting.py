"""Counting the training corpus in one streaming pass: the vocabulary and the batches of an epoch.

Pretraining builds its vocabulary here, and so does fine-tuning with a new softmax.
"""
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, List

from ..atomic import write_atomic
from ..bilm import plan_batches
from ..provenance import data_record, provenance
from .config import LMConfig
from .corpus import Corpus, CorpusStats, split_long
from .distributed import DistInfo, barrier
from .vocab import VOCAB_NAME, Vocab, count_tokens

STATS_NAME = "corpus-stats.json"


@dataclass
class CorpusCount:
    """What one streaming pass over the training corpus found (saved as corpus-stats.json)."""

    stats: CorpusStats
    vocab: Vocab
    segments: int
    batches: int

    def to_dict(self) -> dict:
        return {"stats": self.stats.to_dict(), "vocab_size": len(self.vocab), "segments": self.segments, "batches": self.batches}


def count_corpus(corpus: Corpus, config: LMConfig) -> CorpusCount:
    """Token counts (for the vocabulary) and the number of batches of an epoch, in one pass.

    The batch count plans the same length buckets as training, from lengths only, so steps and
    ETA follow from the data rather than from a constant.
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

    counts = count_tokens(pieces())
    batches += _n_batches(lengths, settings) if lengths else 0
    if settings.mode == "windows":
        batches = (stats.tokens + 2 * segments) // (settings.batch_size * settings.unroll_steps)
    vocab = Vocab.from_counts(counts, size=config.vocab.size, min_count=config.vocab.min_count)
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
    return Vocab.from_disk(output), saved
