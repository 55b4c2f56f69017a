"""Pretraining a biLM from scratch: count the corpus, build the vocabulary and the model, train."""
from pathlib import Path
from typing import Optional, Tuple

import torch

from ..bilm import BiLM
from ..bilm.softmax import WordSoftmax
from .config import LMConfig
from .counting import prepare_vocab
from .corpus import Corpus
from .distributed import DistInfo, restarted_by_torchrun, shutdown
from .lm import LanguageModel, init_for_training
from .loop import RunSummary, train_lm
from .setup import (
    check_held_out, check_output, dev_reader, logger, make_output, setup_process, train_corpus, warn_if_bf16_is_slower,
)
from .vocab import Vocab


def build_pretraining(
    config: LMConfig, output: Path, info: DistInfo, device: torch.device, *, resume: bool, stream=None,
    corpus: Optional[Corpus] = None,
) -> Tuple[LanguageModel, Vocab, Corpus, int]:
    """The vocabulary (counted, or read back on resume), a freshly initialized model and the corpus.

    corpus (Optional[Corpus]): the training corpus, read already (default: ``train_corpus``, which
        refuses one with no usable line).
    RETURNS (Tuple): (language model on ``device``, vocab, training corpus, estimated steps per epoch).
    """
    log = logger(info, stream)
    corpus = train_corpus(config, log=log) if corpus is None else corpus
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

    resume (bool): continue from the newest intact checkpoint in DIR/checkpoints; a worker group
        that torchrun restarts after a failure (``--max-restarts``) does so without it.
    max_time (Optional[float]): seconds for this invocation (overrides the config); 0 for no limit.
    A training or held-out text with no usable line (empty, every line over the limit, unreadable)
    is refused before DIR is made (``corpus.UnusableCorpus``), and a held-out text wholly outside the
    vocabulary before training (``perplexity.AllOutOfVocabulary``): no model is written from nothing.
    """
    output = Path(output)
    torch_device, info = setup_process(config, device)
    try:
        warn_if_bf16_is_slower(config.training.autocast, torch_device, (config.model.dim, config.model.projection_dim),
                               config.training.batch_size, info)
        resume = resume or restarted_by_torchrun(info, torch_device)
        check_output(output, resume=resume)
        log = logger(info, stream)
        corpus = train_corpus(config, log=log)
        dev = dev_reader(config, log=log)
        make_output(output, info)
        lm, vocab, corpus, steps_per_epoch = build_pretraining(
            config, output, info, torch_device, resume=resume, stream=stream, corpus=corpus,
        )
        check_held_out(dev, vocab, log, what="held-out text ([paths] dev)")
        return train_lm(
            lm, vocab, corpus, settings=config.training, corpus_settings=config.corpus, seed=config.seed,
            output=output, info=info, dev_segments=dev, steps_per_epoch=steps_per_epoch,
            resume=resume, max_time=max_time, extra={"training_config": config.raw, "stage": "pretrain", **_language(config, corpus)},
            stream=stream, probe=config.probe,
        )
    finally:
        shutdown(info)



def _language(config: LMConfig, corpus: Corpus) -> dict:
    """{"lang": CODE} where the text's language is known ([corpus] lang, or the spaCy tokenizer it was
    read with; not the multi-language "xx"): the model records it, so `convert` needs no --lang."""
    language = config.corpus.lang or (corpus.tokenizer_name if corpus.tokenizer_name not in ("whitespace", "xx") else None)
    return {"lang": language} if language else {}
