"""Pretraining a biLM from scratch: count the corpus, build the vocabulary and the model, train."""
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, List, Optional, Tuple

import torch

from ..bilm import BiLM, plan_batches
from ..bilm.softmax import WordSoftmax
from ..io.native import write_atomic
from .config import LMConfig
from .corpus import Corpus, CorpusStats, split_long
from .distributed import DistInfo, barrier, shutdown
from .lm import LanguageModel, init_for_training
from .loop import RunSummary, train_lm
# the run set-up moved to setup.py; config_corpus and setup_process stay importable from here as before
from .setup import check_output, config_corpus, dev_reader, logger, make_output, setup_process, train_corpus  # noqa: F401
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
    check_output(output, resume=resume)
    torch_device, info = setup_process(config, device)
    try:
        make_output(output, info)
        lm, vocab, corpus, steps_per_epoch = build_pretraining(config, output, info, torch_device, resume=resume, stream=stream)
        return train_lm(
            lm, vocab, corpus, settings=config.training, corpus_settings=config.corpus, seed=config.seed,
            output=output, info=info, dev_segments=dev_reader(config), steps_per_epoch=steps_per_epoch,
            resume=resume, max_time=max_time, extra={"training_config": config.raw, "stage": "pretrain"},
            stream=stream, probe=config.probe,
        )
    finally:
        shutdown(info)

