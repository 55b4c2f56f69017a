"""torch's threads: the old pipeline config callback that sets them for the whole process, and one
thread in forked workers. The biLM's own calls run on the threads of its model's ``threads``
setting (``layers.torch_threads``), which leaves the rest of the process as it was."""
import logging
from typing import Callable, Type

import torch
from spacy.language import Language
from spacy.util import registry

from .layers.torch_threads import one_thread_in_forked_workers

__all__ = ["one_thread_in_forked_workers", "set_torch_threads_v1"]

logger = logging.getLogger(__name__)


@registry.callbacks("spacy-elmo.set_torch_threads.v1")
def set_torch_threads_v1(threads: int = 1) -> Callable[[Type[Language]], Type[Language]]:
    """A ``[nlp] before_creation`` callback that sets torch's intra-op threads for the whole process
    when the pipeline is created (by ``spacy train``, ``spacy.load``, ``spacy evaluate``, ...).

    Kept for pipelines saved with it; a change it makes is logged as a warning, since it reaches
    every other user of torch in the process. New configs leave ``before_creation`` null and set
    ``threads`` of ``spacy-elmo.BiLM.v3`` (0: chosen for the model on this machine), which applies
    only inside the biLM's own calls.

    threads (int): torch.set_num_threads(threads); 0 keeps torch's default.
    RETURNS (Callable): the callback; it returns the Language class unchanged.
    """
    if threads < 0:
        raise ValueError(f"threads must be >= 0, got {threads}")

    def set_threads(lang_cls: Type[Language]) -> Type[Language]:
        before = torch.get_num_threads()
        if threads and threads != before:
            torch.set_num_threads(threads)
            logger.warning(
                "spacy-elmo.set_torch_threads.v1 (the pipeline's [nlp.before_creation]) set torch's threads for "
                "this whole process from %d to %d; set [nlp] before_creation = null and [components.elmo.model] "
                "threads instead to keep them to the biLM's own calls",
                before,
                threads,
            )
        return lang_cls

    return set_threads
