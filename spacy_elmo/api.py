"""The public loading function."""
from pathlib import Path
from typing import Optional, Union

from .bilm import BiLM
from .bilm.fast import optimize_for_inference
from .io import load_allennlp, load_native
from .shipped import load_shipped_bilm

PathLike = Union[str, Path]
# the elmo component's default inference settings, shared so every entry point runs alike
DEFAULT_CHAR_CACHE_SIZE = 20000


def load_bilm(
    path: Optional[PathLike] = None,
    *,
    options: Optional[PathLike] = None,
    weights: Optional[PathLike] = None,
    optimize: bool = True,
) -> BiLM:
    """Load a biLM from our directory format, or from a published options + HDF5 pair.

    path (Optional[PathLike]): a directory written by ``save_bilm`` (or a pipeline's training output).
    options (Optional[PathLike]): a published options.json (with ``weights``).
    weights (Optional[PathLike]): a published HDF5 weights file (with ``options``).
    With no argument, the English biLM shipped with the package.
    optimize (bool): apply the inference fast path the ``elmo`` component uses
        (``optimize_for_inference`` with a 20,000-token char-CNN cache: lockstep directions,
        outputs within about 2e-6 of the plain computation). False keeps the plain float32
        computation bit for bit.

    RETURNS (BiLM): the model in eval mode on CPU; call ``.embed(sentences)``.
    """
    if path is not None and (options is not None or weights is not None):
        raise ValueError("load_bilm takes either a directory or options= and weights=, not both")
    if path is not None:
        bilm = load_native(path)
    elif options is None and weights is None:
        bilm = load_shipped_bilm()
    elif options is None or weights is None:
        raise ValueError("load_bilm needs a directory, or both options= and weights=, or nothing (the shipped model)")
    else:
        bilm = load_allennlp(options, weights)
    if optimize:
        optimize_for_inference(bilm, char_cache_size=DEFAULT_CHAR_CACHE_SIZE)
    return bilm
