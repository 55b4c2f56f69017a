"""torch.distributed for pretraining launched by ``torchrun`` (gloo on CPU, nccl on GPU).

Without torchrun's environment (WORLD_SIZE unset or 1) everything here is a
no-op, so the same loop runs on one process.
"""
import gc
import os
from dataclasses import dataclass
from typing import Dict, List, Tuple

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        """Only the main process writes checkpoints, models and logs."""
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def init_distributed(device: torch.device) -> DistInfo:
    """Join the process group torchrun describes in the environment (RANK, WORLD_SIZE, MASTER_ADDR...)."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return DistInfo()
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        # DDP's constructor imports torch._dynamo. Imported after the group exists, that import keeps
        # ten references to the group that destroy_process_group never drops (torch 2.13), so gloo's
        # worker threads outlive ``shutdown`` and still run while the interpreter finalizes; one of
        # them dropping its last collective's tensor then needs the GIL there and aborts the process
        # ("terminate called without an active exception", SIGABRT) after a finished run. Imported
        # before the group, it holds none, and ``shutdown`` joins every gloo thread.
        import torch._dynamo  # noqa: F401
        dist.init_process_group(backend=backend)
    return DistInfo(rank=dist.get_rank(), world_size=dist.get_world_size(), local_rank=int(os.environ.get("LOCAL_RANK", "0")))


def restarted_by_torchrun(info: DistInfo, device: torch.device) -> bool:
    """Whether torchrun's elastic agents restarted this worker group after a failure.

    Only the agent whose worker failed counts a restart in TORCHELASTIC_RESTART_COUNT; an agent
    whose workers were healthy restarts them when the other node rejoins the rendezvous and keeps
    its count (torch 2.13, ``SimpleElasticAgent._invoke_run``), so the ranks decide by the maximum:
    otherwise one would resume and the other start over.
    """
    count = torch.tensor([int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))], device=device)
    if info.enabled:
        dist.all_reduce(count, op=dist.ReduceOp.MAX)
    return bool(count.item() > 0)


def all_reduce_sum(info: DistInfo, values: torch.Tensor) -> torch.Tensor:
    """Sum a (small) tensor over ranks, e.g. token counts and losses for logging."""
    if info.enabled:
        values = values.clone()
        dist.all_reduce(values, op=dist.ReduceOp.SUM)
    return values


def from_main(info: DistInfo, value: int, device: torch.device) -> int:
    """The main process's ``value`` (a small int: a choice it made alone) on every rank."""
    if not info.enabled:
        return value
    held = torch.tensor([value], device=device)
    dist.broadcast(held, src=0)
    return int(held.item())


def stop_flags(info: DistInfo, out_of_data: bool, out_of_time: bool, device: torch.device) -> Tuple[bool, bool]:
    """Whether any rank ran out of data or of time, in one collective per step.

    Shards differ a little in size and DDP needs every rank in every step, so an epoch ends for
    all ranks when the first runs dry; each rank measures its own clock.
    """
    if not info.enabled:
        return out_of_data, out_of_time
    flags = torch.tensor([int(out_of_data), int(out_of_time)], device=device)
    dist.all_reduce(flags, op=dist.ReduceOp.MAX)
    return bool(flags[0].item()), bool(flags[1].item())


def gather_to_main(info: DistInfo, tensors: Dict[str, torch.Tensor], device: torch.device) -> List[Dict[str, torch.Tensor]]:
    """Every rank's tensors (same names and shapes on all ranks) as a list by rank, on CPU.

    device (torch.device): where the collective runs (nccl only moves GPU tensors).
    """
    if not info.enabled:
        return [{k: v.detach().cpu() for k, v in tensors.items()}]
    gathered: List[Dict[str, torch.Tensor]] = [{} for _ in range(info.world_size)]
    for name in sorted(tensors):
        value = tensors[name].detach().to(device)
        parts = [torch.empty_like(value) for _ in range(info.world_size)]
        dist.all_gather(parts, value.contiguous())
        for rank, part in enumerate(parts):
            gathered[rank][name] = part.cpu()
    return gathered


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def shutdown(info: DistInfo) -> None:
    """Destroy the process group and with it its backend's threads; call it before the interpreter exits.

    The group's threads stop only once nothing holds the group, and on rank 0 a reference cycle left
    by the finished run still holds it (one reference, gone after a collection), so collect first.
    """
    if info.enabled and dist.is_initialized():
        gc.collect()
        dist.destroy_process_group()
