"""torch threads in processes forked from one that ran the biLM (``nlp.pipe(n_process=N)``)."""
import os

import torch

_registered = False


def one_thread_in_forked_workers() -> None:
    """Make every process forked from this one run torch on one thread (registered once).

    ``nlp.pipe(texts, n_process=N)`` forks its workers. torch's CPU builds use GNU OpenMP, whose
    thread pool does not survive a fork: once this process has run a multi-threaded operation
    (any ``nlp(text)`` with a real model), a worker's first multi-threaded operation waits forever.
    One thread per worker never enters OpenMP; N workers then use N cores.
    """
    global _registered
    if not _registered and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_one_torch_thread)
        _registered = True


def _one_torch_thread() -> None:
    torch.set_num_threads(1)
