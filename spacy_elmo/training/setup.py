"""The set-up that pretraining and fine-tuning runs share: the process, the output directory, the corpora, logging."""
import random
import sys
import warnings
from itertools import islice
from pathlib import Path
from typing import Callable, Iterable, List, Optional, Tuple

import numpy as np
import torch

from ..fast.precision import BF16
from .config import LMConfig
from .corpus import Corpus, CorpusStats, split_long
from .distributed import DistInfo, barrier, init_distributed
from .loop import CHECKPOINTS
from .memory import keep_freed_memory


def setup_process(config: LMConfig, device: str) -> Tuple[torch.device, DistInfo]:
    """Threads, device, process group and seeds (identical on all ranks, so the initial weights are);
    freed memory kept for reuse (``memory.py``); a warning where bf16 autocast would run emulated."""
    keep_freed_memory()
    check_autocast_device(config.training.autocast, torch.device(device))
    warn_if_bf16_is_emulated(config.training.autocast, torch.device(device))
    if config.threads > 0:
        torch.set_num_threads(config.threads)
    torch_device = torch.device(device)
    if torch_device.type == "cuda":
        # explicit, whatever torch's default of the day: TF32 only where the config asks for it
        torch.backends.cuda.matmul.allow_tf32 = config.training.tf32
        torch.backends.cudnn.allow_tf32 = config.training.tf32
    info = init_distributed(torch_device)
    if torch_device.type == "cuda" and info.enabled:
        torch_device = torch.device("cuda", info.local_rank)
        torch.cuda.set_device(torch_device)
    random.seed(config.seed)
    np.random.seed(config.seed)
    torch.manual_seed(config.seed)
    return torch_device, info


def check_autocast_device(autocast: str, device: torch.device) -> None:
    """Refuse float16 autocast off a GPU: CPUs without AVX512-FP16 emulate its products, and its
    gradient scaler is a GPU habit; bfloat16 needs no scaler and runs on CPUs with bf16 arithmetic."""
    if autocast == "fp16" and device.type != "cuda":
        raise ValueError(f'training.autocast "fp16" runs on a GPU only (--device cuda); use "bf16" or "off" on {device.type}')


def warn_if_bf16_is_emulated(autocast: str, device: torch.device) -> None:
    """Warn where ``training.autocast = "bf16"`` meets a CPU without bf16 arithmetic, as inference
    does (``BF16.pays_on``). Training keeps bf16 there (the run asked for its numerics) rather than
    switching to fp32."""
    if autocast == "bf16" and not BF16.pays_on(device):
        warnings.warn(
            'training.autocast "bf16" needs a CPU with bf16 arithmetic (AVX512-BF16 or AMX), which '
            'this one lacks: torch emulates it, several times slower than fp32; set training.autocast = "off" '
            "to train faster here",
            RuntimeWarning,
            stacklevel=3,
        )


def check_output(output: Path, *, resume: bool) -> None:
    """Refuse to start a new run over the checkpoints of an earlier one."""
    if not resume and has_checkpoints(output):
        raise FileExistsError(f"{output} already has checkpoints: pass --resume to continue, or use a new directory")


def has_checkpoints(output: Path) -> bool:
    return (output / CHECKPOINTS).is_dir() and any((output / CHECKPOINTS).iterdir())


def make_output(output: Path, info: DistInfo) -> None:
    """Create the output directory on rank 0; the other ranks wait until it exists."""
    if info.is_main:
        output.mkdir(parents=True, exist_ok=True)
    barrier(info)


def config_corpus(config: LMConfig, paths: str) -> Corpus:
    """A corpus read as the config's [corpus] section says."""
    settings = config.corpus
    return Corpus(paths, fmt=settings.format, tokenizer=settings.tokenizer, max_line_chars=settings.max_line_chars)


def train_corpus(config: LMConfig) -> Corpus:
    if config.train is None:
        raise ValueError("no training corpus: set [paths] train in the config or pass --paths.train PATH")
    return config_corpus(config, config.train)


def dev_reader(config: LMConfig) -> Optional[Callable[[], Iterable[List[str]]]]:
    """A function returning a fresh stream of held-out segments (None without ``paths.dev``)."""
    if config.dev is None:
        return None
    corpus = config_corpus(config, config.dev)
    limit = config.corpus.dev_max_segments or None

    def read() -> Iterable[List[str]]:
        return islice(split_long(corpus.segments(CorpusStats()), config.corpus.max_sentence_tokens), limit)

    return read


def logger(info: DistInfo, stream) -> Callable[[str], None]:
    """A function that prints a line on rank 0 only (to ``stream`` or stderr)."""
    def log(text: str) -> None:
        if info.is_main:
            target = stream if stream is not None else sys.stderr
            target.write(text + "\n")
            target.flush()

    return log
