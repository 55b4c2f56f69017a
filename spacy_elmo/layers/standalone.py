"""A downstream component's own biLM: what an ``ElmoListener`` becomes when spaCy replaces it.

``nlp.replace_listeners("elmo", "tagger", ["model.tok2vec"])`` copies the `elmo` component's model
and calls the ``replace_listener`` in its attrs (spacy-transformers' contract); the copy, wrapped
here, takes the listener's place in the tagger's model, so the tagger runs its own biLM and keeps
its own mix: it no longer needs the `elmo` component, and can be saved, loaded and sourced into
another pipeline alone. The config side (``architectures.replace_listener_cfg``) writes the
``spacy-elmo.StandaloneElmo.v1`` block that builds the same model again.
"""
from typing import Any, Callable, List, Optional, Tuple

from spacy.tokens import Doc
from thinc.api import Model
from thinc.shims.shim import Shim
from thinc.types import Floats3d

from ..bilm import BiLM
from ..data_classes import ElmoOutput
from .bilm_model import clear_frozen_cache, get_bilm, set_bilm, weights_updated

NOT_READY = (
    "The '{name}' component's model has no biLM weights yet: replace its listeners after "
    "nlp.initialize() (or after loading the pipeline), so the copy holds the weights it listens to."
)


def StandaloneElmo(
    bilm_model: Model[List[Doc], List[ElmoOutput]],
    *,
    grad_factor: float = 1.0,
    load_bilm: Optional[Callable[[], BiLM]] = None,
    has_weights: bool = False,
) -> Model[List[Doc], List[Floats3d]]:
    """The biLM layers of Docs from a model the component owns (an ``ElmoListener``'s interface).

    bilm_model (Model): built by ``ElmoBiLM`` (a ``spacy-elmo.BiLM`` architecture).
    grad_factor (float): scale of the gradient sent into the biLM (which only changes when its
        model is ``trainable``).
    load_bilm (Optional[Callable[[], BiLM]]): gives the weights when the model is initialized or
        first called without them (a block built from a config); None: they must be there.
    has_weights (bool): ``bilm_model`` holds its weights already (a copy made by
        ``replace_listener``; a saved model loads them, and this flag, from its bytes).
    RETURNS (Model[List[Doc], List[Floats3d]]): per Doc (L+1, n_tokens, width).
    """
    return Model(
        "elmo_standalone",
        forward,
        init=init,
        layers=[bilm_model],
        attrs={"grad_factor": float(grad_factor), "load_bilm": load_bilm, "has_weights": has_weights},
    )


def replace_listener(copied: Model, listener: Model, upstream: Any) -> Model:
    """spaCy's ``replace_listener`` hook (``Language.replace_listeners``): the node that takes
    ``listener``'s place, holding ``copied`` (spaCy's copy of the `elmo` component's model, with its
    weights and settings), with the listener's gradient factor."""
    if not upstream.cfg.get("has_weights"):
        raise ValueError(NOT_READY.format(name=upstream.name))
    # the copy starts afresh: its own layer cache, inference settings applied again on first use,
    # and its own optimizer state (thinc keys it by the shim's id, which a copied shim keeps)
    clear_frozen_cache(copied)
    set_bilm(copied, get_bilm(copied))
    shim = copied.layers[0].shims[0]
    with Shim.global_id_lock:
        Shim.global_id += 1
        shim.id = Shim.global_id
    return StandaloneElmo(copied, grad_factor=listener.attrs["grad_factor"], has_weights=True)


def _ensure_weights(model: Model) -> None:
    if model.attrs["has_weights"]:
        return
    load = model.attrs["load_bilm"]
    if load is None:
        raise ValueError("This copy of the biLM has no weights and no source to load them from.")
    set_bilm(model.layers[0], load())
    model.attrs["has_weights"] = True


def init(model: Model, X: Optional[List[Doc]] = None, Y: Any = None) -> None:
    _ensure_weights(model)


def forward(model: Model, docs: List[Doc], is_train: bool) -> Tuple[List[Floats3d], Callable]:
    _ensure_weights(model)
    bilm_model = model.layers[0]
    if is_train and bilm_model.attrs["trainable"]:
        model.attrs["weights_moved"] = True
    elif not is_train and model.attrs.get("weights_moved"):
        # the component's optimizer step wrote the weights through numpy views, which torch's version
        # counters miss (as the elmo component's finish_update says): drop what was derived from them
        weights_updated(bilm_model)
        model.attrs["weights_moved"] = False
    outputs, backprop_bilm = bilm_model(docs, is_train)
    factor = model.attrs["grad_factor"]

    def backprop(d_layers: List[Floats3d]) -> List[Doc]:
        return backprop_bilm([d * factor for d in d_layers])

    return [model.ops.asarray3f(out.layers) for out in outputs], backprop
