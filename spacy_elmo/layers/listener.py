"""The layer inside a downstream component that gets the biLM layers from the upstream `elmo` component."""
from typing import Callable, List, Optional, Sequence, Tuple

from spacy.tokens import Doc
from thinc.api import Model
from thinc.types import Floats3d

from ..data_classes import ElmoOutput
from .listener_protocol import UPSTREAM_ATTR, get_batch_id

NOT_ANNOTATED = (
    "The '{name}' listener got Docs without doc._.elmo during training and no batch from the "
    "upstream `elmo` component. A frozen elmo component must also annotate: list it in both "
    "[training] frozen_components and [training] annotating_components."
)


class ElmoListener(Model):
    """Supplies a downstream component with the biLM layers of its Docs (see ``listener_protocol``).

    During ``update`` the upstream `elmo` component runs the biLM once per batch and hands the
    per-Doc outputs to ``receive``; the forward pass returns them and its backward pass sends
    the gradient (times ``grad_factor``) back. At prediction time, and during training when the
    `elmo` component is frozen and annotating, the layers come from ``doc._.elmo``; Docs without
    it get zeros of the right shape (spaCy initializes components on unannotated Docs).

    Dims "nL" (layers, L+1) and "nO" (width) are the biLM's: the upstream component sets them
    when it registers the listener and when it imports weights.
    """

    name = "elmo_listener"

    def __init__(self, upstream_name: str, *, grad_factor: float = 1.0) -> None:
        """upstream_name (str): name of the `elmo` component to listen to, or "*" for any.
        grad_factor (float): scale of the gradient sent to the biLM (0: none). The biLM only
            changes when its own model is trainable (``trainable = true``).
        """
        Model.__init__(
            self,
            name=self.name,
            forward=forward,
            dims={"nL": None, "nO": None},
            attrs={UPSTREAM_ATTR: upstream_name, "grad_factor": float(grad_factor)},
        )
        self._batch_id: Optional[int] = None
        self._outputs: Optional[List[ElmoOutput]] = None
        self._backprop: Optional[Callable] = None

    @property
    def upstream_name(self) -> str:
        return self.attrs[UPSTREAM_ATTR]

    def receive(self, batch_id: int, outputs: List[ElmoOutput], backprop: Callable) -> None:
        """Store the upstream outputs of a training batch and the callback that takes their gradient."""
        self._batch_id = batch_id
        self._outputs = outputs
        self._backprop = backprop

    def set_upstream_shape(self, n_layers: int, width: int) -> None:
        """Record the shape of the upstream biLM's output: ``n_layers`` (L+1) arrays of ``width``."""
        self.set_dim("nL", n_layers, force=True)
        self.set_dim("nO", width, force=True)

    def verify_inputs(self, docs: Sequence[Doc]) -> None:
        """Check that the Docs are the batch the upstream component sent."""
        batch_id = get_batch_id(docs)
        if batch_id != self._batch_id:
            raise ValueError(
                f"The '{self.name}' listener got a different batch ({batch_id}) from the one the "
                f"upstream elmo component sent ({self._batch_id}): run the elmo component before "
                "its listeners, on the same batches."
            )


def forward(model: ElmoListener, docs: List[Doc], is_train: bool) -> Tuple[List[Floats3d], Callable]:
    if is_train and model._batch_id is not None:
        model.verify_inputs(docs)
        # The batch is consumed: a later batch must come from the upstream component again.
        outputs, upstream_backprop = model._outputs, model._backprop
        model._batch_id, model._outputs, model._backprop = None, None, None
        factor = model.attrs["grad_factor"]

        def backprop(d_layers: List[Floats3d]) -> List[Doc]:
            # Always called, even with factor 0: the last listener's callback runs the upstream update.
            return upstream_backprop([d * factor for d in d_layers])

        return [model.ops.asarray3f(out.layers) for out in outputs], backprop
    layers = []
    for doc in docs:
        annotation = _annotation(doc)
        if annotation is not None:
            layers.append(model.ops.asarray3f(annotation.layers))
        elif is_train:
            raise ValueError(NOT_ANNOTATED.format(name=model.name))
        else:
            layers.append(_zeros(model, len(doc)))
    return layers, _no_gradient


def _annotation(doc: Doc) -> Optional[ElmoOutput]:
    # doc._.elmo exists once an elmo component is created; before that no Doc has the annotation
    return doc._.get("elmo") if Doc.has_extension("elmo") else None


def _zeros(model: ElmoListener, n_tokens: int) -> Floats3d:
    if not model.has_dim("nL") or not model.has_dim("nO"):
        raise ValueError(
            "The elmo listener does not know the biLM's shape yet: add the `elmo` component before "
            "the components that listen to it, and initialize the pipeline (nlp.initialize())."
        )
    return model.ops.alloc3f(model.get_dim("nL"), n_tokens, model.get_dim("nO"))


def _no_gradient(d_layers: List[Floats3d]) -> List[Doc]:
    return []
