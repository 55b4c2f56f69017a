"""torch's intra-op threads for the biLM's own calls: chosen for the model on this machine, set
around each call and put back after it, so the rest of the user's process keeps its setting.

The rule for ``threads = 0`` (``threads_for``): one thread for every ``WEIGHTS_PER_THREAD`` weights
a timestep of one LSTM layer reads (its gates, 4 x dim x projection_dim, and its cell projection,
dim x projection_dim), at least one and at most the cores this process may run on. A timestep's
products are what threads split; on small ones spare threads spin and wait, and on a busy machine
they can make a small biLM many times slower. The published small model (2x1024_128) and the
shipped one get one thread, the published original (2x4096_512, 10.5 million weights a step) five,
capped at the cores there are. In a process, the biLM's calls take at most the cores that the
load average left free when they first ran (``free_cores``, read once): threads competing with
other jobs for the same cores made the original's ``spacy train`` run slower than one thread did.
"""
import functools
import os
from contextlib import contextmanager
from typing import Iterator, Optional

import torch

from ..bilm import BiLMConfig

WEIGHTS_PER_THREAD = 2_000_000

_forked_worker = False
_registered = False


def usable_cores() -> int:
    """RETURNS (int): the cores this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


@functools.lru_cache(maxsize=1)
def free_cores() -> int:
    """RETURNS (int): the cores this process may use that the last minute's load average of the
    machine leaves free, counting one runnable thread as this process's own (at least one); read
    once a process, so the count does not change under a run."""
    cores = usable_cores()
    if not hasattr(os, "getloadavg"):
        return cores
    return max(1, min(cores, int(cores + 1 - os.getloadavg()[0])))


def threads_for(config: BiLMConfig, *, cores: int = 0) -> int:
    """The threads the rule gives a biLM of this shape (see the module's docstring).

    cores (int): the cores to cap at; 0: ``usable_cores()``.
    RETURNS (int): at least 1.
    """
    step_weights = 5 * config.dim * config.projection_dim
    return max(1, min(step_weights // WEIGHTS_PER_THREAD, cores or usable_cores()))


def resolve_threads(threads: Optional[int], config: BiLMConfig) -> Optional[int]:
    """RETURNS (Optional[int]): the threads a biLM's calls run on: ``threads``, or where it is 0 the
    rule's count for its shape within the ``free_cores``; one in a forked worker (see
    ``one_thread_in_forked_workers``); None (the process's setting, left alone) where ``threads``
    is None."""
    if threads is None:
        return None
    if threads < 0:
        raise ValueError(f"threads must be 0 (chosen for the model) or positive, got {threads}")
    if _forked_worker:
        return 1
    return threads or threads_for(config, cores=free_cores())


@contextmanager
def torch_threads(threads: Optional[int]) -> Iterator[None]:
    """Run the block on ``threads`` intra-op threads, then give torch back the count it had
    (None: as the process is set).

    The count is process-wide in torch: Python threads that call the biLM at the same time should
    use the same setting, or one of them may run on the other's count.
    """
    before = torch.get_num_threads()
    if threads is None or threads == before:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def one_thread_in_forked_workers() -> None:
    """Make every process forked from this one run torch on one thread (registered once).

    ``nlp.pipe(texts, n_process=N)`` forks its workers. torch's CPU builds use GNU OpenMP, whose
    thread pool does not survive a fork: once this process has run a multi-threaded operation
    (any ``nlp(text)`` with a real model), a worker's first multi-threaded operation waits forever.
    One thread per worker never enters OpenMP; N workers then use N cores. The biLM's own calls
    keep to one thread there too, whatever their setting.
    """
    global _registered
    if not _registered and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_one_torch_thread)
        _registered = True


def _one_torch_thread() -> None:
    global _forked_worker
    _forked_worker = True
    torch.set_num_threads(1)
