"""The biLM an `elmo` component starts from: what ``Elmo.initialize`` imports (the files named in
``[initialize.components.NAME]``, or the English biLM shipped with the package), and the shape it
writes back into the pipeline's config."""
from pathlib import Path
from typing import Optional, Union

from spacy.language import Language

from .architectures import BILM_ARCHITECTURES, bilm_shape
from .bilm import BiLM, BiLMConfig
from .io import ModelFileError
from .io.loading import PIPELINE_FACTORY as FACTORY
from .io.loading import resolve_bilm

PathLike = Union[str, Path]
NO_WEIGHTS = (
    "The '{name}' component has no biLM weights. Set [initialize.components.{name}] "
    "options = \"options.json\" and weights = \"weights.hdf5\" (a published AllenNLP/bilm-tf "
    "pair) or model = \"DIR\" (a spacy-elmo model directory, a pipeline with an elmo component, a "
    "directory holding a published pair, or a published model name) and call nlp.initialize(); or "
    "call nlp.get_pipe('{name}').initialize(lambda: [], options=..., weights=...); or build a ready "
    "pipeline with `python -m spacy_elmo convert`."
)


def initial_bilm(
    *, name: str = FACTORY, options: Optional[PathLike], weights: Optional[PathLike], model: Optional[PathLike]
) -> BiLM:
    """The biLM that ``Elmo.initialize`` imports: whatever ``spacy_elmo.io.loading.resolve_bilm``
    finds for the given files or, where none is given, the English biLM shipped with the package.

    RETURNS (BiLM): loaded on CPU, in eval mode.
    """
    try:
        return resolve_bilm(model, options=options, weights=weights, what=f"[initialize.components.{name}]")
    except ModelFileError as err:
        if (model, options, weights) != (None, None, None):
            raise
        # the shipped biLM is missing: say how a pipeline gives the component its weights
        raise ValueError(f"{NO_WEIGHTS.format(name=name)} ({err})") from err


def record_shape(nlp: Language, name: str, config: BiLMConfig) -> None:
    """Write a biLM shape into the pipeline's config of the component ``name`` (its
    ``[components.NAME.model]`` block, when that block builds one of our biLM architectures);
    the architecture and the other settings of the block are kept."""
    try:
        block = nlp.get_pipe_config(name).get("model")
    except ValueError:
        return
    if isinstance(block, dict) and block.get("@architectures") in BILM_ARCHITECTURES:
        block.update(bilm_shape(config))
