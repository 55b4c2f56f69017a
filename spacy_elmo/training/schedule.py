"""The optimizer of a language-model run and its learning-rate schedule."""
import math
from typing import Iterable, Optional

import torch
from torch import nn

from .config import TrainingSettings


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
