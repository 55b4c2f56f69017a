"""The elmo component's inference arguments, an adapter for pipelines built with ``spacy-elmo.BiLM.v1``.

``spacy-elmo.BiLM.v2`` (and v3) take ``optimize``, ``precision`` and ``char_cache_size`` themselves (they belong
to the model, ``fast.plan.InferencePlan``). A model of ``spacy-elmo.BiLM.v1`` (pipelines saved
before v2) has none: the component's arguments of those names give them, null meaning v1's
defaults. With a later model those arguments are null ("the model's"); a value that differs from the
model's is an error naming both places (one that agrees is accepted).
"""
from typing import Any, Dict, Optional

import srsly
from thinc.api import Model

from .fast import DEFAULT_CHAR_CACHE_SIZE, InferencePlan
from .layers import set_inference

# what a component whose model leaves the settings to it (spacy-elmo.BiLM.v1) runs with by default
V1_INFERENCE = {"optimize": True, "precision": "fp32", "char_cache_size": DEFAULT_CHAR_CACHE_SIZE}


def give_inference_settings(
    model: Model, name: str, *, optimize: Optional[bool], precision: Optional[str], char_cache_size: Optional[int]
) -> None:
    """Apply the elmo component's inference arguments to its model (see the module docstring).

    model (Model): built by ``spacy-elmo.BiLM.v1`` or ``.v2``.
    name (str): the component's name, for the errors (``[components.NAME]``).
    """
    given: Dict[str, Any] = {
        key: value
        for key, value in (("optimize", optimize), ("precision", precision), ("char_cache_size", char_cache_size))
        if value is not None
    }
    plan: Optional[InferencePlan] = model.attrs.get("inference")
    if plan is not None and plan.from_architecture:
        own = plan.settings()
        conflicts = [key for key, value in given.items() if value != own[key]]
        if conflicts:
            raise ValueError(
                f"[components.{name}] "
                + ", ".join(f"{key} = {srsly.json_dumps(given[key])}" for key in conflicts)
                + f" disagrees with [components.{name}.model] "
                + ", ".join(f"{key} = {srsly.json_dumps(own[key])}" for key in conflicts)
                + ": from spacy-elmo.BiLM.v2 on, the inference settings belong to the model; set them in "
                f"[components.{name}.model] and leave those of [components.{name}] null"
            )
        return
    try:
        set_inference(model, InferencePlan(**{**V1_INFERENCE, **given}))
    except ValueError as err:
        raise ValueError(f"[components.{name}] {err}") from None
