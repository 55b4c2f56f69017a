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
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

import torch
from torch import nn

from ..bilm import BiLMState
from ..probes import TrainingProbe
from .batches import BatchIds, LMBatch, epoch_segments, sentence_batches, window_batches
from .carried_state import carry_from_tensors, gathered_state, initial_state
from .checkpoints import latest_checkpoint, restore_training_state, save_checkpoint
from .config import CorpusSettings, ProbeSettings, TrainingSettings
from .corpus import Corpus
from .distributed import DistInfo, all_reduce_sum, barrier, stop_flags
from .lm import LanguageModel
from .model_dir import save_lm
from .perplexity import Perplexity, evaluate_perplexity
from .progress import MetricsLog, ProgressLine, format_duration, plot_learning_curve
from .schedule import learning_rate_at, make_optimizer
from .vocab import Vocab

CHECKPOINTS = "checkpoints"
# [training] autocast: the dtype the forward pass runs its products in ("off": none)
AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass
class RunSummary:
    steps: int = 0  # the step the run ended at, counted from the run's beginning (a resumed run included)
    start_step: int = 0  # the step this invocation started from (0, or the checkpoint's step on --resume)
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

    @property
    def stop_text(self) -> str:
        """What stopped the run, as the commands say it ("stopped by Ctrl-C", "stopped by max_time")."""
        return stop_words(self.stopped_by)


def stop_words(stopped_by: str) -> str:
    return "Ctrl-C" if stopped_by == "interrupted" else stopped_by


def epoch_batches(
    corpus: Corpus, vocab: Vocab, *, settings: TrainingSettings, corpus_settings: CorpusSettings, seed: int,
    epoch: int, info: DistInfo, max_chars: int, batch_ids: Optional[BatchIds] = None,
) -> Iterator[LMBatch]:
    """This rank's batches of one epoch (lines are sharded by rank before tokenizing).

    batch_ids (Optional[BatchIds]): the model's ids of sentences (``BiLM.batch_ids``), which a model
        with a learned character vocabulary needs; the windows layout takes byte ids only.
    """
    segments = epoch_segments(
        corpus, seed=seed, epoch=epoch, max_tokens=corpus_settings.max_sentence_tokens,
        shard=info.rank, n_shards=info.world_size,
    )
    common = dict(seed=seed + info.rank, epoch=epoch, batch_size=settings.batch_size, buffer_size=corpus_settings.buffer_size, max_chars=max_chars)
    if settings.mode == "windows":
        if batch_ids is not None:
            raise ValueError(
                'training.mode = "windows" (bilm-tf\'s stateful layout) reads byte ids, and this biLM has a learned '
                'character vocabulary (an imported ELMoForManyLangs model): set training.mode = "sentences"'
            )
        return window_batches(segments, vocab, unroll_steps=settings.unroll_steps, **common)
    return sentence_batches(segments, vocab, max_batch_tokens=settings.max_batch_tokens, batch_ids=batch_ids, **common)


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
    run = _Run(
        lm, vocab, corpus, settings=settings, corpus_settings=corpus_settings, seed=seed, output=output, info=info,
        dev_segments=dev_segments, extra=extra or {},
    )
    run.restore(resume)
    total_steps = settings.max_steps or (settings.max_epochs * steps_per_epoch if steps_per_epoch else None)
    run.start(total_steps=total_steps, max_time=settings.max_time if max_time is None else max_time, stream=stream, probe=probe)
    with stop_on_interrupt() as run.interrupt:
        stop = run.train_epochs()
    return run.finish(stop)


def best_at_interrupt(summary: "RunSummary", has_dev: bool) -> str:
    """What model-best is when Ctrl-C stopped the run, where no held-out evaluation chose it ("" where one did)."""
    if summary.best_dev is not None:
        return ""
    if not has_dev:
        return "; model-best is the last model (no held-out text to choose by)"
    return "; no held-out evaluation yet: model-best is the last model, unevaluated"



@contextmanager
def stop_on_interrupt() -> Iterator[threading.Event]:
    """An event the first Ctrl-C (SIGINT) sets, so that the loop stops after its step and writes a
    checkpoint there (a checkpoint every ``checkpoint_frequency`` steps can be minutes apart, and
    ``--resume`` would otherwise lose them); a second Ctrl-C interrupts at once. Outside the main
    thread, or where SIGINT is not Python's default handler (ignored, or the caller's own), the
    event is never set and Ctrl-C does what it did.
    """
    interrupt = threading.Event()
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield interrupt
        return

    def first_interrupt(signum, frame) -> None:
        interrupt.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    signal.signal(signal.SIGINT, first_interrupt)
    try:
        yield interrupt
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@dataclass
class RunState:
    """Where a run stands: what a checkpoint records (the rest is in the weights and optimizer) and a resumed run restores."""

    step: int = 0
    epoch: int = 0
    batch_index: int = 0
    carry: Optional[BiLMState] = None
    best: Optional[Dict[str, float]] = None
    # tokens trained on by this rank in this invocation (for the summary's throughput)
    run_tokens: int = 0


def train_step(
    lm: LanguageModel,
    batch: LMBatch,
    *,
    optimizer: torch.optim.Optimizer,
    settings: TrainingSettings,
    step: int,
    initial: Optional[BiLMState] = None,
    module: Optional[nn.Module] = None,
    scaler: Optional[torch.amp.GradScaler] = None,
) -> Tuple[Dict[str, Any], torch.Tensor]:
    """One update after ``step`` updates: forward (under autocast if set), backward, the scheduled rate, clipping, the step.

    optimizer (torch.optim.Optimizer): its groups hold ``initial_lr``, the schedule's base rate.
    initial (Optional[BiLMState]): the state carried from the previous window (windows mode).
    module (Optional[nn.Module]): what runs the forward pass: ``lm`` itself, or its DistributedDataParallel wrapper.
    scaler (Optional[torch.amp.GradScaler]): scales the objective before backward (``gradient_scaler``:
        float16 autocast needs one); a step whose gradients overflowed is skipped and the scale lowered.
    RETURNS (Tuple[dict, torch.Tensor]): the model's outputs and the loss reported (mean token NLL of both directions).
    """
    dtype = AUTOCAST_DTYPES.get(settings.autocast)
    with torch.autocast(lm.bilm.device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        out = lm.run_batch(batch, initial, module=module)
    # bilm-tf differentiates the mean token loss times unroll_steps, i.e. the summed loss of
    # a row's window averaged over rows; with sentences, the summed loss of each sentence
    objective = 0.5 * (out["forward_nll"] + out["backward_nll"]) / len(batch.lengths)
    loss = 0.5 * (out["forward_nll"] / max(out["forward_n"], 1) + out["backward_nll"] / max(out["backward_n"], 1))
    optimizer.zero_grad(set_to_none=True)
    (objective if scaler is None else scaler.scale(objective)).backward()
    for group in optimizer.param_groups:
        group["lr"] = learning_rate_at(step + 1, settings, base=group["initial_lr"])
    if scaler is not None:
        scaler.unscale_(optimizer)  # clip the true gradients
    if settings.grad_clip > 0:
        nn.utils.clip_grad_norm_([p for p in lm.parameters() if p.requires_grad], settings.grad_clip)
    if scaler is None:
        optimizer.step()
    else:
        scaler.step(optimizer)
        scaler.update()
    return out, loss


def gradient_scaler(settings: TrainingSettings, device: torch.device) -> Optional[torch.amp.GradScaler]:
    """The gradient scaler a run needs: float16 autocast's (its range loses small gradients
    unscaled); None otherwise (bfloat16 has float32's range)."""
    return torch.amp.GradScaler(device.type) if settings.autocast == "fp16" else None


class _Run:
    """One invocation of the loop: the model, data and settings it was given, its logs, and its ``RunState``."""

    def __init__(
        self, lm: LanguageModel, vocab: Vocab, corpus: Corpus, *, settings: TrainingSettings,
        corpus_settings: CorpusSettings, seed: int, output: Path, info: DistInfo,
        dev_segments: Optional[Callable[[], Iterable[List[str]]]], extra: Dict[str, Any],
    ) -> None:
        self.lm, self.vocab, self.corpus = lm, vocab, corpus
        self.settings, self.corpus_settings, self.seed = settings, corpus_settings, seed
        self.output, self.info, self.dev_segments, self.extra = output, info, dev_segments, extra
        self.device = lm.bilm.device
        self.optimizer = make_optimizer(lm.parameters(), settings)
        self.scaler = gradient_scaler(settings, self.device)
        self.state = RunState()
        self.interrupt = threading.Event()

    def restore(self, resume: bool) -> None:
        """Continue from the newest intact checkpoint (with ``resume``), else seed this rank's randomness."""
        lm, optimizer, info, state = self.lm, self.optimizer, self.info, self.state
        checkpoint = latest_checkpoint(self.output / CHECKPOINTS) if resume else None
        if checkpoint is not None:
            restore_training_state(checkpoint, lm, optimizer, rank=info.rank)
            state.step, state.epoch, state.batch_index = checkpoint.step, checkpoint.position["epoch"], checkpoint.position["batch"]
            state.best = checkpoint.extra.get("best_dev")
            state.carry = carry_from_tensors(checkpoint.carry, info.rank, lm)
        elif info.enabled:
            # same initial weights everywhere (DDP checks), but each rank its own dropout masks and samples
            torch.manual_seed(self.seed * 1009 + info.rank)
        for group in optimizer.param_groups:
            # the schedule's base rate (checkpoints written before schedules existed lack it)
            group.setdefault("initial_lr", group["lr"])

    def start(self, *, total_steps: Optional[int], max_time: float, stream, probe: Optional[ProbeSettings]) -> None:
        """Wrap the model for distributed training, open the logs and start the clock."""
        lm, info, state = self.lm, self.info, self.state
        self.module: nn.Module = lm
        if info.enabled:
            self.module = nn.parallel.DistributedDataParallel(lm, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        self.max_time = max_time
        self.progress = ProgressLine(total_steps, max_time=max_time, stream=stream)
        self.metrics = MetricsLog(self.output / "metrics.jsonl") if info.is_main else None
        if self.metrics is not None:
            # a resumed run trains again the steps after its checkpoint: their records go, so each step is logged once
            self.metrics.drop_after(state.step)
        self.layer_probe = _layer_probe(probe, self.seed) if info.is_main else None
        self.summary = RunSummary(best_dev=state.best)
        self.started = time.monotonic()
        self.start_step, self.interval = state.step, _Interval()
        if info.is_main:
            self.progress.message(
                f"training from step {state.step} (epoch {state.epoch}, batch {state.batch_index}); " + _ending(total_steps, max_time, self.settings)
            )

    def train_epochs(self) -> str:
        """Train until a limit is reached. RETURNS (str): the limit (max_steps, max_time or max_epochs)."""
        state = self.state
        # a resumed run that had already reached max_steps (killed after its last checkpoint) trains no further
        stop = "max_steps" if self.reached_max_steps() else ""
        self.lm.train()
        while not stop and state.epoch < self.settings.max_epochs:
            stop = self.train_epoch()
            if not stop:
                state.epoch, state.batch_index, state.carry = state.epoch + 1, 0, None
                self.summary.epochs_done = state.epoch
        return stop or "max_epochs"

    def train_epoch(self) -> str:
        """Train on the rest of the current epoch. RETURNS (str): the limit reached, "" if the epoch ended first."""
        state = self.state
        batches = epoch_batches(
            self.corpus, self.vocab, settings=self.settings, corpus_settings=self.corpus_settings, seed=self.seed,
            epoch=state.epoch, info=self.info, max_chars=self.lm.bilm.config.max_characters_per_token,
            batch_ids=None if self.lm.bilm.char_vocab is None else self.lm.bilm.batch_ids,
        )
        for _ in range(state.batch_index):
            next(batches, None)
        while True:
            batch = next(batches, None)
            stop = self.stop_before(batch)
            if stop is not None:
                return stop
            initial = initial_state(self.lm, batch, state.carry)
            out, loss = train_step(
                self.lm, batch, optimizer=self.optimizer, settings=self.settings, step=state.step, initial=initial,
                module=self.module, scaler=self.scaler,
            )
            state.carry = out["state"] if batch.carry_state else None
            state.step += 1
            state.batch_index += 1
            self.interval.add(float(loss.detach()), out["forward_n"])
            state.run_tokens += out["forward_n"]
            self.after_step()
            if self.reached_max_steps():
                return "max_steps"

    def stop_before(self, batch: Optional[LMBatch]) -> Optional[str]:
        """Whether all ranks go on to train on their next batch: None if so, "" if one ran out of data
        (the epoch ends), "max_time" if one ran out of time, "interrupted" after Ctrl-C (``stop_on_interrupt``;
        the ranks agree to stop as they do on time)."""
        out_of_time = bool(self.max_time) and time.monotonic() - self.started >= self.max_time
        out_of_data, out_of_time = stop_flags(self.info, batch is None, out_of_time or self.interrupt.is_set(), self.device)
        if out_of_data:
            return ""
        if out_of_time:
            return "interrupted" if self.interrupt.is_set() else "max_time"
        return None

    def reached_max_steps(self) -> bool:
        return bool(self.settings.max_steps) and self.state.step >= self.settings.max_steps

    def after_step(self) -> None:
        """Log, evaluate and checkpoint when the step is due for it."""
        step, settings = self.state.step, self.settings
        if step % settings.log_frequency == 0:
            self.log_train()
        if step % settings.eval_frequency == 0 and self.dev_segments is not None:
            self.evaluate()
        if step % settings.checkpoint_frequency == 0:
            self.write_models(final=False)
            barrier(self.info)

    def finish(self, stop: str) -> RunSummary:
        """The last log line, evaluation and models (a model-best without held-out data), and the summary."""
        lm, info, state, summary = self.lm, self.info, self.state, self.summary
        self.log_train()
        # an interrupted run stops at once: its checkpoint and model-last; the held-out score waits for --resume
        due = summary.last_dev is None or summary.last_dev.get("step") != state.step
        if self.dev_segments is not None and due and stop != "interrupted":
            self.evaluate()
        self.write_models(final=True)
        if info.is_main:
            if state.best is None:
                # without held-out data the last model is the best one we know
                save_lm(lm, self.vocab, self.output / "model-best", extra={**self.extra, "step": state.step})
            records = self.metrics.read() if self.metrics else []
            plot_learning_curve(records, self.output / "learning-curve.png")
            self.progress.message(f"stopped by {stop_words(stop)} at step {state.step}; models in {self.output}")
        barrier(info)
        total_tokens = all_reduce_sum(info, torch.tensor([state.run_tokens], dtype=torch.float64, device=self.device))
        # tokens and seconds are this invocation's: the steps from start_step to steps
        summary.steps, summary.start_step, summary.tokens, summary.stopped_by = state.step, self.start_step, int(total_tokens.item()), stop
        summary.seconds, summary.best_dev = time.monotonic() - self.started, state.best
        return summary

    def log_train(self) -> None:
        """Report the interval's mean loss and the tokens/s of all ranks together."""
        info, interval = self.info, self.interval
        totals = all_reduce_sum(info, torch.tensor([interval.loss_sum, interval.steps, interval.tokens], dtype=torch.float64, device=self.device))
        loss_sum, steps, tokens = (float(x) for x in totals.cpu())
        seconds = time.monotonic() - interval.started
        interval.__init__()
        if steps == 0:
            return
        loss = loss_sum / steps
        rate = tokens / seconds if seconds > 0 else 0.0
        if info.is_main:
            step = self.state.step
            self.progress.report(step=step, start_step=self.start_step, tokens_per_s=rate, loss=loss, elapsed=time.monotonic() - self.started)
            self.metrics.write({"kind": "train", "step": step, "loss": loss, "train_ppl": math.exp(min(loss, 50.0)), "tokens_per_s": rate, "time": time.time()})

    def evaluate(self) -> None:
        """Held-out perplexity (and the layer probe) on rank 0; a new best is saved as model-best."""
        lm, vocab, state, summary, progress = self.lm, self.vocab, self.state, self.summary, self.progress
        step = state.step
        if self.info.is_main:
            result: Perplexity = evaluate_perplexity(lm, self.dev_segments(), vocab)
            record = {"step": step, **result.to_dict()}
            if self.layer_probe is not None:
                probed = self.layer_probe(lm.bilm)
                record["probe"] = {"task": probed.task, "metric": probed.metric, "scores": probed.scores, "seconds": probed.seconds}
                progress.message(f"step {step}: {probed.task} probe " + ", ".join(f"{k} {v:.1f}" for k, v in probed.scores.items()))
            summary.last_dev = record
            summary.history.append(record)
            self.metrics.write({"kind": "eval", "dev_ppl": result.mean, **record, "time": time.time()})
            progress.message(
                f"step {step}: held-out ppl {result.mean:.2f} (forward {result.forward:.2f}, backward {result.backward:.2f}, "
                f"{result.n_forward} tokens, OOV {100 * record['oov_rate']:.1f}%)"
            )
            if state.best is None or result.mean < state.best["ppl"]:
                state.best = record
                save_lm(lm, vocab, self.output / "model-best", extra={**self.extra, "step": step, "dev": record})
        else:
            summary.last_dev = {"step": step}
        barrier(self.info)

    def write_models(self, final: bool) -> None:
        """A checkpoint (weights, optimizer, data position, every rank's carried state and RNG) and model-last."""
        state = self.state
        carry_tensors, rng_by_rank = gathered_state(self.info, state.carry, self.device)
        if not self.info.is_main:
            return
        meta = {**self.extra, "step": state.step, "best_dev": state.best}
        save_checkpoint(
            self.output / CHECKPOINTS, step=state.step, position={"epoch": state.epoch, "batch": state.batch_index},
            model=self.lm, optimizer=self.optimizer, carry=carry_tensors, extra=meta, keep=self.settings.keep_checkpoints,
            rng_by_rank=rng_by_rank,
        )
        save_lm(self.lm, self.vocab, self.output / "model-last", extra={**meta, "final": final})


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


def _ending(total_steps: Optional[int], max_time: float, settings: TrainingSettings) -> str:
    """When the run will end, as far as it is known before it starts."""
    if total_steps:
        return f"about {total_steps} steps"
    limits = ([f"after {format_duration(max_time)}"] if max_time else []) + [f"after {settings.max_epochs} epochs"]
    return "steps per epoch not counted ahead; it stops " + " or ".join(limits)


def _layer_probe(settings: Optional[ProbeSettings], seed: int) -> Optional[TrainingProbe]:
    if settings is None or not settings.enabled:
        return None
    return TrainingProbe(
        settings.task, train=settings.train, eval=settings.eval, train_fraction=settings.train_fraction,
        max_sentences=settings.max_sentences or None, seed=seed,
    )
