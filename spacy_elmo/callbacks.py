"""Registered callbacks for pipeline configs."""
from typing import Callable, Type

import torch
from spacy.language import Language
from spacy.util import registry


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
