"""torch's intra-op threads for the biLM's own calls: chosen for the model on this machine, set
around each call and put back after it, so the rest of the user's process keeps its setting.

The rule for ``threads = 0`` (``threads_for``): one thread for every ``WEIGHTS_PER_THREAD`` weights
a timestep of one LSTM layer reads (its gates, 4 x dim x projection_dim, and its cell projection,
dim x projection_dim), at least one and at most the cores this process may run on. A timestep's
products are what threads split; on small ones spare threads spin and wait, and on a busy machine
they can make a small biLM many times slower. The published small model (2x1024_128) and the
shipped one get one thread, the published original (2x4096_512, 10.5 million weights a step) five,
capped at the cores there are. In a process, the biLM's calls take at most the cores that other
jobs left free when they first ran (``free_cores``, read once): threads competing with other jobs
for the same cores made the original's ``spacy train`` run slower than one thread did. The jobs
are counted as they run then (the runnable threads of ``/proc/loadavg``, the median of a few
readings), not by the load average: a minute's average still counts a job that has just ended,
and a run started right after another would take one thread where the machine has two free.

Nor does the rule take more threads than the user allowed (``user_cap``): ``OMP_NUM_THREADS``
where it is set, and torch's own count as the process has it (``torch.set_num_threads``, read at
each call outside the biLM's own). torch cannot tell a count the user set from its default, but its
default is the physical cores (or ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS``), a ceiling the rule
keeps to as well.
"""
import functools
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

import torch

from ..bilm import BiLMConfig

WEIGHTS_PER_THREAD = 2_000_000
# readings of the runnable threads (``running_elsewhere``) and the seconds between them
RUNNABLE_READINGS = 5
READING_INTERVAL_S = 0.02
LOADAVG = Path("/proc/loadavg")

_forked_worker = False
_registered = False


def usable_cores() -> int:
    """RETURNS (int): the cores this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


@functools.lru_cache(maxsize=1)
def free_cores() -> int:
    """RETURNS (int): the cores this process may use that other jobs leave free now (at least one):
    the threads runnable elsewhere on the machine (``running_elsewhere``), or where Linux's
    ``/proc/loadavg`` cannot be read the last minute's load average less one (this process); read
    once a process, so the count does not change under a run."""
    cores = usable_cores()
    busy = running_elsewhere()
    if busy is None:
        if not hasattr(os, "getloadavg"):
            return cores
        return max(1, min(cores, int(cores + 1 - os.getloadavg()[0])))
    return max(1, min(cores, cores - busy))


def running_elsewhere(path: Path = LOADAVG, readings: int = RUNNABLE_READINGS,
                      interval: float = READING_INTERVAL_S) -> Optional[int]:
    """The threads runnable on the machine besides the one reading: the median of ``readings``
    readings of the fourth field of ``/proc/loadavg`` (``running/total``), less one.

    RETURNS (Optional[int]): None where the file is missing or not in that form.
    """
    counts = []
    for index in range(readings):
        try:
            running = int(path.read_text().split()[3].split("/")[0])
        except (OSError, IndexError, ValueError):
            return None
        counts.append(max(0, running - 1))
        if index + 1 < readings:
            time.sleep(interval)
    return sorted(counts)[len(counts) // 2]


def user_cap() -> int:
    """RETURNS (int): the most torch threads the user allows this process: ``OMP_NUM_THREADS``
    where it holds a positive count (its first, for a nested list such as "4,2"), and torch's
    count now (``torch.get_num_threads``: the user's ``torch.set_num_threads``, else torch's
    default), whichever is lower; at least 1."""
    cap = torch.get_num_threads()
    given = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if given.isdigit() and int(given) > 0:
        cap = min(cap, int(given))
    return max(1, cap)


def threads_for(config: BiLMConfig, *, cores: int = 0) -> int:
    """The threads the rule gives a biLM of this shape (see the module's docstring).

    cores (int): the cores to cap at; 0: ``usable_cores()`` within the user's cap (``user_cap``).
    RETURNS (int): at least 1.
    """
    step_weights = 5 * config.dim * config.projection_dim
    return max(1, min(step_weights // WEIGHTS_PER_THREAD, cores or min(usable_cores(), user_cap())))


def resolve_threads(threads: Optional[int], config: BiLMConfig) -> Optional[int]:
    """RETURNS (Optional[int]): the threads a biLM's calls run on: ``threads``, or where it is 0 the
    rule's count for its shape within the ``free_cores`` and the user's cap (``user_cap``: never
    more than ``OMP_NUM_THREADS`` or torch's count as the user left it); one in a forked worker (see
    ``one_thread_in_forked_workers``); None (the process's setting, left alone) where ``threads``
    is None."""
    if threads is None:
        return None
    if threads < 0:
        raise ValueError(f"threads must be 0 (chosen for the model) or positive, got {threads}")
    if _forked_worker:
        return 1
    return threads or threads_for(config, cores=min(free_cores(), user_cap()))


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
