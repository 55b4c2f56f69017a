"""Tiny real pretraining runs for the fault-injection and untrusted-file tests.

Runs go through ``spacy_elmo.training.pretrain.pretrain`` (what ``python -m spacy_elmo pretrain``
calls) with configs/bilm-tiny.cfg. ``start_child`` runs one in a forked process, so it can be
SIGKILLed like a real job without paying the interpreter's start-up (seconds) on every resume.
"""
import io
import multiprocessing
import random
from pathlib import Path
from typing import Any, Dict

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


def _child(config: LMConfig, output: Path, resume: bool) -> None:
    torch.set_num_threads(1)
    run(config, output, resume=resume)


def start_child(config: LMConfig, output: Path, *, resume: bool) -> multiprocessing.Process:
    process = multiprocessing.get_context("fork").Process(target=_child, args=(config, output, resume), daemon=True)
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
