"""torch's threads: the pipeline config callback that sets them, and one thread in forked workers."""
import os
from typing import Callable, Type

import torch
from spacy.language import Language
from spacy.util import registry

_registered = False


@registry.callbacks("spacy-elmo.set_torch_threads.v1")
def set_torch_threads_v1(threads: int = 1) -> Callable[[Type[Language]], Type[Language]]:
    """A ``[nlp] before_creation`` callback that sets torch's intra-op threads when the pipeline
    is created (by ``spacy train``, ``spacy.load``, ``spacy evaluate``, ...).

    Small biLMs run much faster on one thread: spare threads spin and, on a busy machine, can make
    a tiny biLM a hundred times slower. Give a large biLM the cores it should use.

    threads (int): torch.set_num_threads(threads); 0 keeps torch's default.
    RETURNS (Callable): the callback; it returns the Language class unchanged.
    """
    if threads < 0:
        raise ValueError(f"threads must be >= 0, got {threads}")

    def set_threads(lang_cls: Type[Language]) -> Type[Language]:
        if threads:
            torch.set_num_threads(threads)
        return lang_cls

    return set_threads


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
