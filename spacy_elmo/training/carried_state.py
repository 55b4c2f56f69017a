"""The LSTM state carried from one window to the next in ``training.mode = "windows"`` (bilm-tf's
stateful layout): what the next batch starts from, and how each rank's state goes into a checkpoint
and comes back from it."""
from typing import Dict, Optional

import torch

from ..bilm import BiLMState
from .batches import LMBatch
from .distributed import DistInfo, gather_to_main
from .lm import LanguageModel


def initial_state(lm: LanguageModel, batch: LMBatch, carry: Optional[BiLMState]) -> Optional[BiLMState]:
    """Windows carry the forward state only: the backward LM reads each window right to left, and the
    state at a window's left end has already seen the token the next window's first position predicts."""
    if not batch.carry_state or carry is None:
        return None
    zero = lm.bilm.zero_state(len(batch.lengths))
    return carry[0], zero[1]


def gathered_state(info: DistInfo, carry: Optional[BiLMState], device: torch.device):
    """Each rank's carried forward state and torch RNG state, gathered on rank 0 for the checkpoint."""
    local: Dict[str, torch.Tensor] = {"rng": torch.get_rng_state()}
    if carry is not None:
        for k, (h, c) in enumerate(carry[0]):
            local[f"{k}.h"], local[f"{k}.c"] = h, c
    gathered = gather_to_main(info, local, device)
    carry_tensors = {f"r{r}.{name}": t for r, d in enumerate(gathered) for name, t in d.items() if name != "rng"}
    rng_by_rank = [d["rng"] for d in gathered]
    return carry_tensors, rng_by_rank


def carry_from_tensors(tensors: Dict[str, torch.Tensor], rank: int, lm: LanguageModel) -> Optional[BiLMState]:
    """This rank's carried forward state from a checkpoint's tensors (``gathered_state``), or None."""
    prefix = f"r{rank}."
    mine = {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
    if not mine:
        return None
    device = lm.bilm.device
    forward = [(mine[f"{k}.h"].to(device), mine[f"{k}.c"].to(device)) for k in range(lm.bilm.config.n_layers)]
    return forward, []
