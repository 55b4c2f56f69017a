"""The set-up that pretraining and fine-tuning runs share: the process, the output directory, the corpora, logging."""
import random
import sys
import warnings
from itertools import islice
from pathlib import Path
from typing import Callable, Iterable, List, Optional, Tuple

import numpy as np
import torch

from ..fast import train_payoff
from ..fast.precision import BF16
from .config import LMConfig
from .corpus import Corpus, CorpusStats, check_usable, split_long
from .perplexity import oov_rate_checked, oov_warning
from .distributed import DistInfo, barrier, init_distributed
from .loop import CHECKPOINTS
from .memory import keep_freed_memory, keep_made_kernels


def setup_process(config: LMConfig, device: str) -> Tuple[torch.device, DistInfo]:
    """Threads, device, process group and seeds (identical on all ranks, so the initial weights are);
    freed memory and made kernels kept for reuse (``memory.py``); a warning where bf16 autocast would
    run emulated."""
    keep_freed_memory()
    keep_made_kernels()
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


def warn_if_bf16_is_slower(autocast: str, device: torch.device, shape: Tuple[int, int], rows: int, info: DistInfo) -> None:
    """Warn where bf16 autocast asked for (``training.autocast``, or ``[finetune] autocast``) trains slower than float32 would on this
    machine (``fast.train_payoff.choose``, timed once per machine on the LSTM's shape (cells,
    projection) at ``rows`` rows); training keeps bf16, as asked. One process of a distributed run
    times nothing (the processes would each measure)."""
    if autocast != "bf16" or device.type != "cpu" or info.enabled or not BF16.pays_on(device):
        return
    choice = train_payoff.choose(shape[0], shape[1], min(rows, train_payoff.ROWS), device)
    if not choice.bf16:
        warnings.warn(
            f'bf16 autocast, as asked, is slower than float32 here: bf16\'s training products ran at '
            f'{choice.speed():.2f}x float32\'s (median of {len(choice.measured["fp32_us"])} rounds at '
            f'{choice.measured["rows"]} rows, timed on this machine); --training.autocast off (or, to fine-tune, '
            '[finetune] autocast = "auto") trains faster here',
            RuntimeWarning,
            stacklevel=3,
        )


class TimeSpent(RuntimeError):
    """The run's time limit was spent before training began: no step would be taken, and the
    model written would be the start's, unchanged."""


def check_time_left(limit: Optional[float], spent: float, *, before: str) -> None:
    """Refuse to train when the time limit ``limit`` (seconds; None or 0: none) is already spent.

    spent (float): the seconds the run has taken so far.
    before (str): what took the time, for the message.
    """
    if limit and spent >= limit:
        raise TimeSpent(f"the time limit ({limit:g}s) was spent before training began ({spent:.0f}s {before}): no "
                        "model written; give --max-time (or [training] max_time) more time")


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


def config_corpus(config: LMConfig, paths: str, *, lang: Optional[str] = None) -> Corpus:
    """A corpus read as the config's [corpus] section says.

    lang (Optional[str]): the text's language where the model records one (fine-tuning); else [corpus] lang.
    """
    settings = config.corpus
    return Corpus(paths, fmt=settings.format, tokenizer=settings.tokenizer, lang=lang or settings.lang,
                  sentences=settings.sentences, max_line_chars=settings.max_line_chars)


def train_corpus(config: LMConfig, *, lang: Optional[str] = None, log: Optional[Callable[[str], None]] = None) -> Corpus:
    """The training corpus, refused before anything is trained or written where it has no usable
    line (``corpus.check_usable``: empty, every line over the limit, unreadable); ``log`` gets the
    tokenizer it is read with and why."""
    if config.train is None:
        raise ValueError("no training corpus: set [paths] train in the config or pass --paths.train PATH")
    corpus = config_corpus(config, config.train, lang=lang)
    check_usable(corpus, what="training corpus")
    if log is not None:
        log(f"training corpus: {corpus.tokenizer_note}")
    return corpus


# the warning a run without a held-out text logs as it starts
NO_DEV = ("warning: no held-out text ([paths] dev, --paths.dev): model-best will be the last model, not one chosen "
          "by held-out perplexity")


def dev_reader(
    config: LMConfig, *, lang: Optional[str] = None, log: Optional[Callable[[str], None]] = None, without: str = "",
) -> Optional[Callable[[], Iterable[List[str]]]]:
    """A function returning a fresh stream of held-out segments (None without ``paths.dev``, which
    ``log`` is warned of: ``NO_DEV``, then ``without``, what else the command lacks without one);
    a held-out text with no usable line is refused (``corpus.check_usable``)."""
    if config.dev is None:
        if log is not None:
            log(NO_DEV + without)
        return None
    return segment_reader(config_corpus(config, config.dev, lang=lang), config, what="held-out text ([paths] dev)", log=log)


def segment_reader(
    corpus: Corpus, config: LMConfig, *, what: str, log: Optional[Callable[[str], None]] = None, capped: bool = True,
) -> Callable[[], Iterable[List[str]]]:
    """A function returning a fresh stream of ``corpus``'s segments, cut as training cuts them and
    (``capped``) at most ``[corpus] dev_max_segments`` of them; refused when it has no usable line."""
    check_usable(corpus, what=what)
    if log is not None:
        log(f"{what}: {corpus.tokenizer_note}")
    limit = (config.corpus.dev_max_segments or None) if capped else None

    def read() -> Iterable[List[str]]:
        return islice(split_long(corpus.segments(CorpusStats()), config.corpus.max_sentence_tokens), limit)

    return read


def check_held_out(
    read: Optional[Callable[[], Iterable[List[str]]]], vocab, log: Callable[[str], None], *, what: str = "held-out text",
) -> Optional[float]:
    """The OOV rate of a held-out text under ``vocab``: refused at 100% (its perplexity would be
    <UNK>'s alone), a warning in the log at ``OOV_WARN`` or more (its perplexity is flattered).

    RETURNS (Optional[float]): the rate; None without ``read``.
    """
    if read is None:
        return None
    words = oov = 0
    for tokens in read():
        words += len(tokens)
        oov += sum(1 for token in tokens if token not in vocab.index)
    rate = oov_rate_checked(oov, words, what=what)
    warning = oov_warning(rate, what=what)
    if warning:
        log(warning)
    return rate


def logger(info: DistInfo, stream) -> Callable[[str], None]:
    """A function that prints a line on rank 0 only (to ``stream`` or stderr)."""
    def log(text: str) -> None:
        if info.is_main:
            target = stream if stream is not None else sys.stderr
            target.write(text + "\n")
            target.flush()

    return log
