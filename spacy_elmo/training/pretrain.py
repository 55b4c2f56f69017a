"""Pretraining a biLM from scratch: count the corpus, build the vocabulary and the model, train."""
import json
import random
import sys
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Callable, Iterable, List, Optional, Tuple

import numpy as np
import torch

from ..bilm import BiLM, plan_batches
from ..bilm.softmax import WordSoftmax
from ..io.native import write_atomic
from .config import LMConfig
from .corpus import Corpus, CorpusStats, split_long
from .distributed import DistInfo, barrier, init_distributed, shutdown
from .lm import LanguageModel, init_for_training
from .loop import CHECKPOINTS, RunSummary, train_lm
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


def dev_reader(config: LMConfig) -> Optional[Callable[[], Iterable[List[str]]]]:
    """A function returning a fresh stream of held-out segments (None without ``paths.dev``)."""
    if config.dev is None:
        return None
    corpus = config_corpus(config, config.dev)
    limit = config.corpus.dev_max_segments or None

    def read() -> Iterable[List[str]]:
        return islice(split_long(corpus.segments(CorpusStats()), config.corpus.max_sentence_tokens), limit)

    return read


def setup_process(config: LMConfig, device: str) -> tuple:
    """Threads, device, process group and seeds (identical on all ranks, so the initial weights are)."""
    if config.threads > 0:
        torch.set_num_threads(config.threads)
    torch_device = torch.device(device)
    info = init_distributed(torch_device)
    if torch_device.type == "cuda" and info.enabled:
        torch_device = torch.device("cuda", info.local_rank)
        torch.cuda.set_device(torch_device)
    random.seed(config.seed)
    np.random.seed(config.seed)
    torch.manual_seed(config.seed)
    return torch_device, info


def config_corpus(config: LMConfig, paths: str) -> Corpus:
    """A corpus read as the config's [corpus] section says."""
    settings = config.corpus
    return Corpus(paths, fmt=settings.format, tokenizer=settings.tokenizer, max_line_chars=settings.max_line_chars)


def train_corpus(config: LMConfig) -> Corpus:
    if config.train is None:
        raise ValueError("no training corpus: set [paths] train in the config or pass --paths.train PATH")
    return config_corpus(config, config.train)


def prepare_vocab(corpus: Corpus, config: LMConfig, output: Path, info: DistInfo, *, resume: bool, log) -> tuple:
    """Count the corpus on rank 0 (or read the counts a resumed run saved) and share them by file."""
    stats_path = output / STATS_NAME
    if info.is_main and not (resume and stats_path.is_file() and (output / VOCAB_NAME).is_file()):
        counted = count_corpus(corpus, config)
        counted.vocab.to_disk(output)
        write_atomic(stats_path, json.dumps(counted.to_dict(), indent=2).encode("utf-8"))
        log(f"corpus: {counted.stats.summary()}; {counted.segments} segments, vocabulary {len(counted.vocab)}")
    barrier(info)
    saved = json.loads(stats_path.read_text(encoding="utf-8"))
    return Vocab.from_disk(output), saved


def build_pretraining(
    config: LMConfig, output: Path, info: DistInfo, device: torch.device, *, resume: bool, stream=None
) -> Tuple[LanguageModel, Vocab, Corpus, int]:
    """The vocabulary (counted, or read back on resume), a freshly initialized model and the corpus.

    RETURNS (Tuple): (language model on ``device``, vocab, training corpus, estimated steps per epoch).
    """
    log = logger(info, stream)
    corpus = train_corpus(config)
    vocab, saved = prepare_vocab(corpus, config, output, info, resume=resume, log=log)
    bilm = init_for_training(BiLM(config.model))
    softmax = WordSoftmax(len(vocab), config.model.projection_dim, n_samples=config.softmax.n_samples)
    lm = LanguageModel(bilm, softmax, dropout=config.training.dropout).to(device)
    return lm, vocab, corpus, max(saved["batches"] // info.world_size, 1)


def pretrain(
    config: LMConfig,
    output: Path,
    *,
    resume: bool = False,
    max_time: Optional[float] = None,
    device: str = "cpu",
    stream=None,
) -> RunSummary:
    """Train a new biLM as the config says; DIR gets model-last/, model-best/, checkpoints/, metrics.

    resume (bool): continue from the newest intact checkpoint in DIR/checkpoints.
    max_time (Optional[float]): seconds for this invocation (overrides the config); 0 for no limit.
    """
    output = Path(output)
    if not resume and (output / CHECKPOINTS).is_dir() and any((output / CHECKPOINTS).iterdir()):
        raise FileExistsError(f"{output} already has checkpoints: pass --resume to continue, or use a new directory")
    torch_device, info = setup_process(config, device)
    try:
        if info.is_main:
            output.mkdir(parents=True, exist_ok=True)
        barrier(info)
        lm, vocab, corpus, steps_per_epoch = build_pretraining(config, output, info, torch_device, resume=resume, stream=stream)
        return train_lm(
            lm, vocab, corpus, settings=config.training, corpus_settings=config.corpus, seed=config.seed,
            output=output, info=info, dev_segments=dev_reader(config), steps_per_epoch=steps_per_epoch,
            resume=resume, max_time=max_time, extra={"training_config": config.raw, "stage": "pretrain"},
            stream=stream, probe=config.probe,
        )
    finally:
        shutdown(info)


def logger(info: DistInfo, stream):
    """A function that prints a line on rank 0 only (to ``stream`` or stderr)."""
    def log(text: str) -> None:
        if info.is_main:
            target = stream if stream is not None else sys.stderr
            target.write(text + "\n")
            target.flush()

    return log
