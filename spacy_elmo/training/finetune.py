"""Domain fine-tuning: continue language-model training of a trained biLM on new unlabeled text.

The start is any biLM ``io.loading.locate_bilm`` accepts (see ``load_lm_parts``):
our model directory, a spaCy pipeline, a published pair or name, or the shipped
English biLM. A start with a head (``io.lm_head``: our directory's vocabulary and
softmax, the shipped model's included, or a published softmax + vocabulary: a
folder or zip holding them beside the pair, or ``original`` / ``original-5.5b``)
continues with it, its whole vocabulary kept (as bilm-tf's restart-from-checkpoint
did): the perplexity before is then the head's own, the one ``evaluate`` gives,
and after training it is measured on the same vocabulary, so the two compare. A
head larger than ``SAMPLED_ABOVE`` words trains with the sampled softmax (as the
published models were trained; ``[softmax] n_samples`` candidates, or bilm-tf's
8,192 where that is 0): the full softmax's gradient would need (tokens x words)
floats. Restricting the head to the domain's words would be cheaper, but its
perplexity would be over another vocabulary and compare with nothing.

Any other start has no softmax, so a vocabulary is counted from the domain text
and a new softmax built for it; with ``[finetune] warmup_steps`` > 0 that softmax
first trains alone with the biLM frozen (else the random head's gradients would
wreck the pretrained LSTMs in the first steps). Held-out perplexity on
``[paths] dev`` is reported before and after.
"""
import json
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Dict, Optional

from ..files import file_sha256, write_atomic
from ..bilm.softmax import DEFAULT_CHUNK_SIZE, WordSoftmax
from ..io.loading import PathLike
from ..io.native import WEIGHTS_NAME
from ..records.provenance import data_record, model_record, provenance
from .config import LMConfig
from .distributed import DistInfo, barrier, shutdown
from .lm import LanguageModel
from .loop import RunSummary, train_lm
from .model_dir import load_lm_parts
from .perplexity import evaluate_perplexity
from .corpus import resolve_paths
from .counting import prepare_vocab
from .setup import check_output, dev_reader, has_checkpoints, logger, make_output, setup_process, train_corpus
from .vocab import Vocab

# a given head of more words than this trains with the sampled softmax: its full softmax's
# gradient would hold (tokens x words) floats
SAMPLED_ABOVE = DEFAULT_CHUNK_SIZE
# bilm-tf's n_negative_samples_batch, as the published models were trained
PUBLISHED_SAMPLES = 8192
REPORT_NAME = "finetune-report.json"


def _written_weights(output: Path) -> Dict[str, str]:
    """The SHA-256 of the weights this run left in model-best/ and model-last/."""
    files = {name: output / name / WEIGHTS_NAME for name in ("model-best", "model-last")}
    return {name: file_sha256(path) for name, path in files.items() if path.is_file()}
BEFORE_NAME = "before.json"
WARMUP_DIR = "warmup"


@dataclass
class FinetuneResult:
    before: Optional[Dict[str, float]]
    after: Optional[Dict[str, float]]
    summary: RunSummary
    new_softmax: bool


def finetune(
    config: LMConfig,
    output: Path,
    *,
    model: Optional[PathLike] = None,
    options: Optional[PathLike] = None,
    weights: Optional[PathLike] = None,
    resume: bool = False,
    max_time: Optional[float] = None,
    device: str = "cpu",
    stream=None,
) -> FinetuneResult:
    """Fine-tune on ``config.train``; DIR gets model-last/, model-best/, checkpoints/ and finetune-report.json.

    model (Optional[PathLike]): where to start (see ``load_lm_parts``); with ``options`` and
        ``weights`` a published pair instead, and with none of them the shipped English biLM.
    The biLM architecture comes from the starting model; the config's [model] section is not used.
    max_time (Optional[float]): seconds for the whole invocation (warm-up included).
    """
    output = Path(output)
    check_output(output, resume=resume)
    started = time.monotonic()
    torch_device, info = setup_process(config, device)
    try:
        make_output(output, info)
        log = logger(info, stream)
        bilm, vocab, softmax_weights = load_lm_parts(model, options=options, weights=weights, what="finetune")
        corpus = train_corpus(config)
        new_softmax = softmax_weights is None
        if new_softmax:
            vocab, _ = prepare_vocab(corpus, config, output, info, resume=resume, log=log)
        else:
            if info.is_main:
                vocab.to_disk(output)
        if softmax_weights is None:
            softmax = WordSoftmax(len(vocab), bilm.config.projection_dim, n_samples=config.softmax.n_samples)
        else:
            n_samples = config.softmax.n_samples or (PUBLISHED_SAMPLES if len(vocab) > SAMPLED_ABOVE else 0)
            softmax = WordSoftmax.from_weights(softmax_weights["weight"], softmax_weights["bias"], n_samples=n_samples)
        lm = LanguageModel(bilm, softmax, dropout=config.training.dropout).to(torch_device)
        dev = dev_reader(config)
        resuming = resume and has_checkpoints(output)
        limit = config.training.max_time if max_time is None else max_time
        if resuming:
            before = _saved_before(output)
        else:
            warmed = new_softmax and config.finetune.warmup_steps > 0
            if warmed:
                # the "before" perplexity is the given biLM's: measured once its new softmax is
                # fitted (a random head would make any fine-tuning look like a huge gain)
                _warm_up(lm, vocab, corpus, config, output, info, _remaining(limit, started), stream)
            when = "before fine-tuning" + (" (the biLM as given, its new softmax warmed up)" if warmed else "")
            if new_softmax and not warmed:
                when += " (untrained new softmax: not the biLM's perplexity)"
            before = _report_dev(lm, vocab, dev, info, log, when)
            if before is not None:
                before["softmax"] = "given" if not new_softmax else ("warmed up" if warmed else "untrained")
                write_atomic(output / BEFORE_NAME, json.dumps(before).encode("utf-8"))
        remaining = _remaining(limit, started)
        extra = {"training_config": config.raw, "stage": "finetune", "start": str(model or options or "shipped")}
        summary = train_lm(
            lm, vocab, corpus, settings=config.training, corpus_settings=config.corpus, seed=config.seed,
            output=output, info=info, dev_segments=dev, resume=resume, max_time=remaining, extra=extra,
            stream=stream, steps_per_epoch=None, probe=config.probe,
        )
        after = summary.best_dev
        if info.is_main:
            # tokens and seconds cover this invocation, from start_step to steps (a resumed run starts past 0)
            report = {"before": before, "after_best": after, "after_last": summary.last_dev, "steps": summary.steps,
                      "start_step": summary.start_step, "tokens": summary.tokens, "seconds": summary.seconds,
                      "new_softmax": new_softmax, "weights_sha256": _written_weights(output),
                      "provenance": provenance(
                          model=model_record(model, options=options, weights=weights),
                          model_note="the model fine-tuning started from",
                          data=data_record(corpus.files + (resolve_paths(config.dev) if config.dev else [])),
                      )}
            write_atomic(output / REPORT_NAME, json.dumps(report, indent=2).encode("utf-8"))
            if before and after and "ppl" in after:
                log(f"held-out perplexity: {before['ppl']:.2f} before, {after['ppl']:.2f} after fine-tuning")
        barrier(info)
        return FinetuneResult(before=before, after=after, summary=summary, new_softmax=new_softmax)
    finally:
        shutdown(info)


def _warm_up(lm: LanguageModel, vocab: Vocab, corpus, config: LMConfig, output: Path, info: DistInfo, max_time, stream) -> None:
    """Train only the new softmax for ``warmup_steps`` steps (no held-out checks, no dropout on a frozen biLM)."""
    for param in lm.bilm.parameters():
        param.requires_grad_(False)
    steps = config.finetune.warmup_steps
    settings = replace(
        config.training, max_steps=steps, max_epochs=max(config.training.max_epochs, 1),
        learning_rate=config.finetune.warmup_learning_rate, eval_frequency=steps + 1, checkpoint_frequency=steps + 1,
    )
    try:
        train_lm(
            lm, vocab, corpus, settings=settings, corpus_settings=config.corpus, seed=config.seed,
            output=output / WARMUP_DIR, info=info, max_time=max_time, extra={"stage": "finetune-warmup"}, stream=stream,
        )
    finally:
        for param in lm.bilm.parameters():
            param.requires_grad_(True)


def _report_dev(lm: LanguageModel, vocab: Vocab, dev, info: DistInfo, log, when: str) -> Optional[Dict[str, Any]]:
    if dev is None or not info.is_main:
        return None
    result = evaluate_perplexity(lm, dev(), vocab).to_dict()
    log(f"held-out perplexity {when}: {result['ppl']:.2f} (forward {result['forward_ppl']:.2f}, "
        f"backward {result['backward_ppl']:.2f})")
    return result


def _saved_before(output: Path) -> Optional[Dict[str, Any]]:
    path = output / BEFORE_NAME
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _remaining(limit: Optional[float], started: float) -> float:
    if not limit:
        return 0.0
    # 0 means "no limit" to the loop, so a spent budget becomes the smallest positive one
    return max(limit - (time.monotonic() - started), 1e-6)
