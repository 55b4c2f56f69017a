"""The public loading function."""
from pathlib import Path
from typing import Optional, Union

from .bilm import BiLM
from .io import load_allennlp, load_native
from .shipped import load_shipped_bilm

PathLike = Union[str, Path]


def load_bilm(
    path: Optional[PathLike] = None, *, options: Optional[PathLike] = None, weights: Optional[PathLike] = None
) -> BiLM:
    """Load a biLM from our directory format, or from a published options + HDF5 pair.

    path (Optional[PathLike]): a directory written by ``save_bilm`` (or a pipeline's training output).
    options (Optional[PathLike]): a published options.json (with ``weights``).
    weights (Optional[PathLike]): a published HDF5 weights file (with ``options``).
    With no argument, the English biLM shipped with the package.

    RETURNS (BiLM): the model in eval mode on CPU; call ``.embed(sentences)``.
    """
    if path is not None and (options is not None or weights is not None):
        raise ValueError("load_bilm takes either a directory or options= and weights=, not both")
    if path is not None:
        return load_native(path)
    if options is None and weights is None:
        return load_shipped_bilm()
    if options is None or weights is None:
        raise ValueError("load_bilm needs a directory, or both options= and weights=, or nothing (the shipped model)")
    return load_allennlp(options, weights)
