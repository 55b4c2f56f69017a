"""The language-model training loop shared by pretraining and fine-tuning.

One step: a batch per process; the gradient of the forward plus backward NLL
summed over each row and averaged over rows (as bilm-tf: mean token loss times
unroll_steps), global-norm clipping, an Adagrad or Adam update; the loss
reported is the mean token NLL of the two directions. Every
``checkpoint_frequency`` steps (and at the end) a checkpoint and ``model-last``
are written; every ``eval_frequency`` steps the held-out perplexity is computed
with the full softmax and the best model kept as ``model-best``; with a
``[probe]`` section enabled, a layer probe's scores go into the same record. Only
rank 0 writes; all ranks step together.
"""
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional

import torch
from torch import nn

from ..bilm import BiLMState
from ..probes import TrainingProbe
from .batches import LMBatch, epoch_segments, sentence_batches, window_batches
from .checkpoints import latest_checkpoint, restore_training_state, save_checkpoint
from .config import CorpusSettings, ProbeSettings, TrainingSettings
from .corpus import Corpus
from .distributed import DistInfo, all_reduce_sum, barrier, gather_to_main, stop_flags
from .lm import LanguageModel
from .model_dir import save_lm
from .perplexity import Perplexity, evaluate_perplexity
from .progress import MetricsLog, ProgressLine, plot_learning_curve
from .vocab import Vocab

CHECKPOINTS = "checkpoints"


@dataclass
class RunSummary:
    steps: int = 0
    epochs_done: int = 0
    tokens: int = 0
    seconds: float = 0.0
    stopped_by: str = ""
    best_dev: Optional[Dict[str, float]] = None
    last_dev: Optional[Dict[str, float]] = None
    history: List[Dict[str, Any]] = field(default_factory=list)

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def make_optimizer(params: Iterable[nn.Parameter], settings: TrainingSettings, lr: Optional[float] = None) -> torch.optim.Optimizer:
    """Adagrad as bilm-tf (lr 0.2, initial accumulator 1.0), or Adam."""
    params = [p for p in params if p.requires_grad]
    lr = settings.learning_rate if lr is None else lr
    if settings.optimizer == "adagrad":
        return torch.optim.Adagrad(params, lr=lr, initial_accumulator_value=settings.initial_accumulator)
    return torch.optim.Adam(params, lr=lr, betas=(settings.adam_beta1, settings.adam_beta2))


def learning_rate_at(step: int, settings: TrainingSettings, base: Optional[float] = None) -> float:
    """The rate for update number ``step`` (1-based): linear warm-up, then constant or inverse-sqrt decay.

    A function of the step alone, so a resumed run continues the schedule where it stopped.
    """
    base = settings.learning_rate if base is None else base
    warmup = settings.warmup_steps
    if warmup and step <= warmup:
        return base * step / warmup
    if settings.lr_schedule == "inverse_sqrt" and warmup:
        return base * math.sqrt(warmup / step)
    return base


def epoch_batches(
    corpus: Corpus, vocab: Vocab, *, settings: TrainingSettings, corpus_settings: CorpusSettings, seed: int,
    epoch: int, info: DistInfo, max_chars: int,
) -> Iterator[LMBatch]:
    """This rank's batches of one epoch (lines are sharded by rank before tokenizing)."""
    segments = epoch_segments(
        corpus, seed=seed, epoch=epoch, max_tokens=corpus_settings.max_sentence_tokens,
        shard=info.rank, n_shards=info.world_size,
    )
    common = dict(seed=seed + info.rank, epoch=epoch, batch_size=settings.batch_size, buffer_size=corpus_settings.buffer_size, max_chars=max_chars)
    if settings.mode == "windows":
        return window_batches(segments, vocab, unroll_steps=settings.unroll_steps, **common)
    return sentence_batches(segments, vocab, max_batch_tokens=settings.max_batch_tokens, **common)


def train_lm(
    lm: LanguageModel,
    vocab: Vocab,
    corpus: Corpus,
    *,
    settings: TrainingSettings,
    corpus_settings: CorpusSettings,
    seed: int,
    output: Path,
    info: DistInfo,
    dev_segments: Optional[Callable[[], Iterable[List[str]]]] = None,
    steps_per_epoch: Optional[int] = None,
    resume: bool = False,
    max_time: Optional[float] = None,
    extra: Optional[Dict[str, Any]] = None,
    stream=None,
    probe: Optional[ProbeSettings] = None,
) -> RunSummary:
    """Train ``lm`` in place and write DIR/checkpoints, DIR/model-last, DIR/model-best, DIR/metrics.jsonl.

    steps_per_epoch (Optional[int]): the estimate from the counting pass (for ETA and ``max_steps`` = 0).
    max_time (Optional[float]): seconds for this invocation (overrides ``training.max_time``); 0: no limit.
    probe (Optional[ProbeSettings]): when enabled, a layer probe at each evaluation (rank 0).
    """
    device = lm.bilm.device
    max_time = settings.max_time if max_time is None else max_time
    total_steps = settings.max_steps or (settings.max_epochs * steps_per_epoch if steps_per_epoch else None)
    optimizer = make_optimizer(lm.parameters(), settings)
    step, epoch, batch_index, run_tokens = 0, 0, 0, 0
    carry: Optional[BiLMState] = None
    best: Optional[Dict[str, float]] = None
    checkpoint = latest_checkpoint(output / CHECKPOINTS) if resume else None
    if checkpoint is not None:
        restore_training_state(checkpoint, lm, optimizer, rank=info.rank)
        step, epoch, batch_index = checkpoint.step, checkpoint.position["epoch"], checkpoint.position["batch"]
        best = checkpoint.extra.get("best_dev")
        carry = _carry_from_tensors(checkpoint.carry, info.rank, lm)
    elif info.enabled:
        # same initial weights everywhere (DDP checks), but each rank its own dropout masks and samples
        torch.manual_seed(seed * 1009 + info.rank)
    for group in optimizer.param_groups:
        # the schedule's base rate (checkpoints written before schedules existed lack it)
        group.setdefault("initial_lr", group["lr"])
    module: nn.Module = lm
    if info.enabled:
        module = nn.parallel.DistributedDataParallel(lm, device_ids=[device.index] if device.type == "cuda" else None)
    progress = ProgressLine(total_steps, max_time=max_time, stream=stream)
    metrics = MetricsLog(output / "metrics.jsonl") if info.is_main else None
    layer_probe = _layer_probe(probe, seed) if info.is_main else None
    summary = RunSummary(best_dev=best)
    start = time.monotonic()
    start_step, interval = step, _Interval()
    if info.is_main:
        progress.message(f"training from step {step} (epoch {epoch}, batch {batch_index}); about {total_steps or '?'} steps")

    def write_models(final: bool) -> None:
        carry_tensors, rng_by_rank = _gathered_state(info, carry, device)
        if not info.is_main:
            return
        meta = {**(extra or {}), "step": step, "best_dev": best}
        save_checkpoint(
            output / CHECKPOINTS, step=step, position={"epoch": epoch, "batch": batch_index}, model=lm,
            optimizer=optimizer, carry=carry_tensors, extra=meta, keep=settings.keep_checkpoints,
            rng_by_rank=rng_by_rank,
        )
        save_lm(lm, vocab, output / "model-last", extra={**meta, "final": final})

    # a resumed run that had already reached max_steps (killed after its last checkpoint) trains no further
    stop = "max_steps" if settings.max_steps and step >= settings.max_steps else ""
    lm.train()
    while not stop and epoch < settings.max_epochs:
        batches = epoch_batches(
            corpus, vocab, settings=settings, corpus_settings=corpus_settings, seed=seed, epoch=epoch, info=info,
            max_chars=lm.bilm.config.max_characters_per_token,
        )
        for _ in range(batch_index):
            next(batches, None)
        while True:
            batch = next(batches, None)
            out_of_data, out_of_time = stop_flags(info, batch is None, bool(max_time) and time.monotonic() - start >= max_time, device)
            if out_of_data:
                break
            if out_of_time:
                stop = "max_time"
                break
            initial = _initial_state(lm, batch, carry)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=settings.precision == "bf16"):
                out = lm.run_batch(batch, initial, module=module)
            # bilm-tf differentiates the mean token loss times unroll_steps, i.e. the summed loss of
            # a row's window averaged over rows; with sentences, the summed loss of each sentence
            objective = 0.5 * (out["forward_nll"] + out["backward_nll"]) / len(batch.lengths)
            loss = 0.5 * (out["forward_nll"] / max(out["forward_n"], 1) + out["backward_nll"] / max(out["backward_n"], 1))
            optimizer.zero_grad(set_to_none=True)
            objective.backward()
            for group in optimizer.param_groups:
                group["lr"] = learning_rate_at(step + 1, settings, base=group["initial_lr"])
            if settings.grad_clip > 0:
                nn.utils.clip_grad_norm_([p for p in lm.parameters() if p.requires_grad], settings.grad_clip)
            optimizer.step()
            carry = out["state"] if batch.carry_state else None
            step += 1
            batch_index += 1
            interval.add(float(loss.detach()), out["forward_n"])
            run_tokens += out["forward_n"]
            if step % settings.log_frequency == 0:
                _log_train(info, interval, progress, metrics, step, start_step, start, device)
            if step % settings.eval_frequency == 0 and dev_segments is not None:
                best = _evaluate(lm, vocab, dev_segments, info, metrics, progress, summary, step, best, output, extra, layer_probe)
            if step % settings.checkpoint_frequency == 0:
                write_models(final=False)
                barrier(info)
            if settings.max_steps and step >= settings.max_steps:
                stop = "max_steps"
                break
        if not stop:
            epoch, batch_index, carry = epoch + 1, 0, None
            summary.epochs_done = epoch
    stop = stop or "max_epochs"
    _log_train(info, interval, progress, metrics, step, start_step, start, device)
    if dev_segments is not None and (summary.last_dev is None or summary.last_dev.get("step") != step):
        best = _evaluate(lm, vocab, dev_segments, info, metrics, progress, summary, step, best, output, extra, layer_probe)
    write_models(final=True)
    if info.is_main:
        if best is None:
            # without held-out data the last model is the best one we know
            save_lm(lm, vocab, output / "model-best", extra={**(extra or {}), "step": step})
        records = metrics.read() if metrics else []
        plot_learning_curve(records, output / "learning-curve.png")
        progress.message(f"stopped by {stop} at step {step}; models in {output}")
    barrier(info)
    total_tokens = all_reduce_sum(info, torch.tensor([run_tokens], dtype=torch.float64, device=device))
    summary.steps, summary.tokens, summary.stopped_by = step, int(total_tokens.item()), stop
    summary.seconds, summary.best_dev = time.monotonic() - start, best
    return summary


@dataclass
class _Interval:
    loss_sum: float = 0.0
    steps: int = 0
    tokens: int = 0
    started: float = field(default_factory=time.monotonic)

    def add(self, loss: float, tokens: int) -> None:
        self.loss_sum += loss
        self.steps += 1
        self.tokens += tokens


def _log_train(info, interval, progress, metrics, step, start_step, start, device) -> None:
    """Report the interval's mean loss and the tokens/s of all ranks together."""
    totals = all_reduce_sum(info, torch.tensor([interval.loss_sum, interval.steps, interval.tokens], dtype=torch.float64, device=device))
    loss_sum, steps, tokens = (float(x) for x in totals.cpu())
    seconds = time.monotonic() - interval.started
    interval.__init__()
    if steps == 0:
        return
    loss = loss_sum / steps
    rate = tokens / seconds if seconds > 0 else 0.0
    if info.is_main:
        progress.report(step=step, start_step=start_step, tokens_per_s=rate, loss=loss, elapsed=time.monotonic() - start)
        metrics.write({"kind": "train", "step": step, "loss": loss, "train_ppl": math.exp(min(loss, 50.0)), "tokens_per_s": rate, "time": time.time()})


def _layer_probe(settings: Optional[ProbeSettings], seed: int) -> Optional[TrainingProbe]:
    if settings is None or not settings.enabled:
        return None
    return TrainingProbe(
        settings.task, train=settings.train, eval=settings.eval, train_fraction=settings.train_fraction,
        max_sentences=settings.max_sentences or None, seed=seed,
    )


def _evaluate(lm, vocab, dev_segments, info, metrics, progress, summary, step, best, output, extra, layer_probe=None):
    if info.is_main:
        result: Perplexity = evaluate_perplexity(lm, dev_segments(), vocab)
        record = {"step": step, **result.to_dict()}
        if layer_probe is not None:
            probed = layer_probe(lm.bilm)
            record["probe"] = {"task": probed.task, "metric": probed.metric, "scores": probed.scores, "seconds": probed.seconds}
            progress.message(f"step {step}: {probed.task} probe " + ", ".join(f"{k} {v:.1f}" for k, v in probed.scores.items()))
        summary.last_dev = record
        summary.history.append(record)
        metrics.write({"kind": "eval", "dev_ppl": result.mean, **record, "time": time.time()})
        progress.message(
            f"step {step}: held-out ppl {result.mean:.2f} (forward {result.forward:.2f}, backward {result.backward:.2f}, "
            f"{result.n_forward} tokens, OOV {100 * record['oov_rate']:.1f}%)"
        )
        if best is None or result.mean < best["ppl"]:
            best = record
            save_lm(lm, vocab, output / "model-best", extra={**(extra or {}), "step": step, "dev": record})
    else:
        summary.last_dev = {"step": step}
    barrier(info)
    return best


def _initial_state(lm: LanguageModel, batch: LMBatch, carry: Optional[BiLMState]) -> Optional[BiLMState]:
    """Windows carry the forward state only: the backward LM reads each window right to left, and the
    state at a window's left end has already seen the token the next window's first position predicts."""
    if not batch.carry_state or carry is None:
        return None
    zero = lm.bilm.zero_state(len(batch.lengths))
    return carry[0], zero[1]


def _gathered_state(info: DistInfo, carry: Optional[BiLMState], device: torch.device):
    """Each rank's carried forward state and torch RNG state, gathered on rank 0 for the checkpoint."""
    local: Dict[str, torch.Tensor] = {"rng": torch.get_rng_state()}
    if carry is not None:
        for k, (h, c) in enumerate(carry[0]):
            local[f"{k}.h"], local[f"{k}.c"] = h, c
    gathered = gather_to_main(info, local, device)
    carry_tensors = {f"r{r}.{name}": t for r, d in enumerate(gathered) for name, t in d.items() if name != "rng"}
    rng_by_rank = [d["rng"] for d in gathered]
    return carry_tensors, rng_by_rank


def _carry_from_tensors(tensors: Dict[str, torch.Tensor], rank: int, lm: LanguageModel) -> Optional[BiLMState]:
    prefix = f"r{rank}."
    mine = {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
    if not mine:
        return None
    device = lm.bilm.device
    forward = [(mine[f"{k}.h"].to(device), mine[f"{k}.c"].to(device)) for k in range(lm.bilm.config.n_layers)]
    return forward, []
