"""Tiny real pretraining runs for the fault-injection and untrusted-file tests.

Runs go through ``spacy_elmo.training.pretrain.pretrain`` (what ``python -m spacy_elmo pretrain``
calls) with configs/bilm-tiny.cfg. ``start_child`` runs one in a forked process, so it can be
SIGKILLed like a real job without paying the interpreter's start-up (seconds) on every resume.
A ``KillPoint`` makes the child SIGKILL itself when its own progress reaches a given point
(a step, a file of a checkpoint or of model-last, the corpus count), so where a kill lands
does not depend on how fast the machine runs.
"""
import io
import multiprocessing
import os
import random
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional

import torch
from safetensors.torch import load_file

from spacy_elmo.training.config import LMConfig, load_lm_config
from spacy_elmo.training.pretrain import pretrain

REPO = Path(__file__).resolve().parent.parent.parent
TINY_CONFIG = REPO / "configs" / "bilm-tiny.cfg"
WORDS = "the a bank river money flows near over under cat dog sat on mat with big small red blue runs".split()


def write_corpus(path: Path, *, lines: int = 300, seed: int = 0) -> Path:
    rng = random.Random(seed)
    path.write_text(
        "".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 14))) + "\n" for _ in range(lines)),
        encoding="utf-8",
    )
    return path


def tiny_config(train: Path, **training: Any) -> LMConfig:
    """configs/bilm-tiny.cfg on ``train`` with dropout on (so RNG state matters on resume)."""
    overrides: Dict[str, Any] = {"paths.train": str(train), "training.eval_frequency": 10**6}
    overrides.update({f"training.{k}": v for k, v in training.items()})
    return load_lm_config(TINY_CONFIG, overrides)


def run(config: LMConfig, output: Path, *, resume: bool = False) -> None:
    pretrain(config, output, resume=resume, stream=io.StringIO())


@dataclass(frozen=True)
class KillPoint:
    """Where a child run SIGKILLs itself.

    where (str): "startup": while the corpus is counted (after ``nth`` segments), before the run
        writes anything of its own; "step": right after the optimizer update of global step
        ``step``, before the loop counts it; "checkpoint" / "model-last": at the ``nth`` file or
        directory renamed into checkpoints/ or model-last/ after the update of step ``step``,
        before that rename (its temporary copy is left behind). If the writes of that step end
        before the ``nth`` rename, the kill comes at the next optimizer update.
    """

    where: str
    step: int = 0
    nth: int = 1


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def arm_kill(point: KillPoint, output: Path, start_step: int) -> None:
    """Install the hooks that kill this (throwaway) process at ``point`` of a run writing to
    ``output`` from step ``start_step``."""
    import importlib

    from torch.optim.optimizer import register_optimizer_step_post_hook

    counting_module = importlib.import_module("spacy_elmo.training.counting")

    if point.where == "startup":
        count_tokens = counting_module.count_tokens

        def counting(segments, *args, **kwargs):
            def pieces():
                for i, tokens in enumerate(segments):
                    if i == point.nth:
                        _die()
                    yield tokens

            return count_tokens(pieces(), *args, **kwargs)

        counting_module.count_tokens = counting
        return
    if point.where not in ("step", "checkpoint", "model-last"):
        raise ValueError(f"unknown kill point {point.where!r}")
    progress = {"step": start_step, "renames": 0}

    def after_update(optimizer, args, kwargs) -> None:
        progress["step"] += 1
        if progress["step"] > point.step or progress["step"] == point.step and point.where == "step":
            _die()

    register_optimizer_step_post_hook(after_update)
    if point.where == "step":
        return
    rename = os.replace
    target = (output / ("checkpoints" if point.where == "checkpoint" else "model-last")).resolve()

    def replace(src, dst, *args, **kwargs):
        # checkpoints: its three files, then the directory itself; model-last: its four files
        if progress["step"] == point.step and target in Path(dst).resolve().parents:
            progress["renames"] += 1
            if progress["renames"] == point.nth:
                _die()
        return rename(src, dst, *args, **kwargs)

    os.replace = replace


def _child(config: LMConfig, output: Path, resume: bool, kill: Optional[KillPoint], start_step: int) -> None:
    torch.set_num_threads(1)
    if kill is not None:
        arm_kill(kill, output, start_step)
    run(config, output, resume=resume)


def start_child(
    config: LMConfig, output: Path, *, resume: bool, kill: Optional[KillPoint] = None, start_step: int = 0
) -> multiprocessing.Process:
    """Run in a forked process; with ``kill``, it SIGKILLs itself there (``start_step``: the step
    it resumes from, i.e. the newest intact checkpoint's)."""
    args = (config, output, resume, kill, start_step)
    process = multiprocessing.get_context("fork").Process(target=_child, args=args, daemon=True)
    process.start()
    return process


def final_weights(output: Path) -> Dict[str, torch.Tensor]:
    """model-last's biLM and softmax tensors, by name."""
    model = load_file(str(output / "model-last" / "model.safetensors"))
    softmax = load_file(str(output / "model-last" / "softmax.safetensors"))
    return {**model, **{f"softmax.{k}": v for k, v in softmax.items()}}


def assert_same_weights(a: Dict[str, torch.Tensor], b: Dict[str, torch.Tensor]) -> None:
    assert sorted(a) == sorted(b)
    different = [name for name in a if not torch.equal(a[name], b[name])]
    assert different == [], f"weights differ from the uninterrupted run: {different[:5]}"
