"""The biLM a model starts from, and the bytes that carry it inside a saved pipeline.

``initial_bilm`` is what an `elmo` component (or a component's own copy of the biLM) imports when
it has no weights yet: the source named in its model block (``[components.NAME.model] name``), the
files of ``[initialize.components.NAME]`` (pipelines configured before the model block took a
name), or the English biLM shipped with the package. ``pack_bilm``/``unpack_bilm`` are how a biLM
inside a downstream component's thinc model is saved and loaded: its shape, learned character
vocabulary and safetensors weights, never a pickle, so a saved copy comes back in the shape it was
saved in, whatever its config block builds first."""
from pathlib import Path
from typing import Any, Optional, Union

import srsly

from .bilm import BiLM, BiLMConfig
from .bilm.char_vocab import CharVocabulary
from .fast import attach
from .io import ModelFileError, bilm_from_bytes, bilm_to_bytes
from .io.loading import PIPELINE_FACTORY as FACTORY
from .io.loading import resolve_bilm

PathLike = Union[str, Path]
NO_WEIGHTS = (
    "The '{name}' component has no biLM weights. Name them in its model block: "
    "[components.{name}.model] name = \"SOURCE\" (a published model name, a spacy-elmo model "
    "directory, a pipeline with an elmo component, a directory holding a published pair, a zip) "
    "and call nlp.initialize(); or build a ready pipeline with `python -m spacy_elmo convert`."
)


def initial_bilm(
    *,
    name: str = FACTORY,
    options: Optional[PathLike] = None,
    weights: Optional[PathLike] = None,
    model: Optional[PathLike] = None,
    source: Optional[PathLike] = None,
) -> BiLM:
    """The biLM a component imports: whatever ``spacy_elmo.io.loading.resolve_bilm`` finds for the
    files of ``[initialize.components.NAME]`` (``options``/``weights``, or ``model``), else for
    ``source`` (the model block's ``name``), else the English biLM shipped with the package.

    name (str): the component's name, for the errors.
    RETURNS (BiLM): loaded on CPU, in eval mode.
    """
    from_initialize = (model, options, weights) != (None, None, None)
    what = f"[initialize.components.{name}]" if from_initialize else f"[components.{name}.model] name"
    path = model if from_initialize else source
    try:
        return resolve_bilm(path, options=options, weights=weights, what=what)
    except ModelFileError as err:
        if from_initialize:
            raise
        if path is not None:
            raise ValueError(f"{what} = {str(path)!r}: {err}") from err
        # the shipped biLM is missing: say how a pipeline gives the component its weights
        raise ValueError(f"{NO_WEIGHTS.format(name=name)} ({err})") from err


def pack_bilm(bilm: BiLM) -> bytes:
    """A biLM as bytes: its options, learned character vocabulary (if any) and safetensors weights."""
    char_vocab = None if bilm.char_vocab is None else bilm.char_vocab.to_json()
    return srsly.msgpack_dumps({"options": bilm.config.to_options(), "char_vocab": char_vocab, "weights": bilm_to_bytes(bilm)})


def unpack_bilm(current: Any, data: bytes, device: Any) -> BiLM:
    """What ``pack_bilm`` wrote, rebuilt in its stored shape on ``device`` (thinc's
    ``PyTorchShim`` deserializer: ``current`` is the module it replaces).

    RETURNS (BiLM): in eval mode, with the exact runner the `elmo` component's biLM gets.
    """
    msg = srsly.msgpack_loads(data)
    char_vocab = None if msg["char_vocab"] is None else CharVocabulary.from_json(msg["char_vocab"])
    config = BiLMConfig.from_options(msg["options"])
    bilm = bilm_from_bytes(config, msg["weights"], char_vocab=char_vocab, source="a component's own copy of the biLM")
    attach(bilm)
    return bilm.to(device)
