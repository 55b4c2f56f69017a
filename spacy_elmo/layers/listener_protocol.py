"""The contract between the upstream `elmo` component and the listener layers of downstream components.

A listener is a thinc ``Model`` node inside a downstream component's model that

- carries ``node.attrs[UPSTREAM_ATTR]``: the name of the `elmo` component it listens to,
  or ``"*"`` for any;
- has a method ``receive(batch_id: int, outputs: List[ElmoOutput], backprop: Callable)``;
- may have a method ``set_upstream_shape(n_layers: int, width: int)``: the component calls
  it when the listener registers and whenever imported weights change the biLM's shape,
  so downstream models can size themselves before seeing any output.

During ``Elmo.update`` the component runs the biLM once on the batch and calls
``receive`` on every listener (all the listeners of all downstream components, in
pipeline order) with ``get_batch_id(docs)``, the per-doc outputs (``ElmoOutput``
whose ``layers`` live on the model's device), and a callback. The listener's forward
pass, called later with the same docs, checks the batch id and uses the outputs;
its backward pass calls the callback with the gradient for every doc's ``layers``
(same shapes, same device) and returns what it returns. Gradients from several
listeners are summed; the callback given to the last listener also runs the
biLM's backward pass. When the biLM is frozen (the default) the callbacks do
nothing and no computation graph is kept. At prediction time (or when `elmo` is
a frozen, annotating component) listeners read ``doc._.elmo`` instead.
"""
from typing import Any, Callable, Iterable, List, Sequence

from spacy.tokens import Doc
from thinc.api import Model, Ops
from thinc.types import Floats3d

from ..data_classes import ElmoOutput

UPSTREAM_ATTR = "elmo_upstream"
ANY_UPSTREAM = "*"


def get_batch_id(docs: Iterable[Doc]) -> int:
    """A content-sensitive id of a batch of Docs, to check a listener gets the batch it was sent."""
    return sum(sum(token.orth for token in doc) for doc in docs)


def is_listener_for(node: Any, upstream_name: str) -> bool:
    """Whether a model node is a listener of the `elmo` component named ``upstream_name``."""
    if not isinstance(node, Model) or not callable(getattr(node, "receive", None)):
        return False
    return node.attrs.get(UPSTREAM_ATTR) in (ANY_UPSTREAM, upstream_name)


def send_to_listeners(
    listeners: Sequence[Model],
    docs: List[Doc],
    outputs: List[ElmoOutput],
    backprop_layers: Callable[[List[Floats3d]], List[Doc]],
    *,
    ops: Ops,
    on_gradient: Callable[[Floats3d], None],
    after_backprop: Callable[[], None],
) -> None:
    """The upstream side of a training batch: call ``receive`` on every listener with the batch's
    outputs and a callback. The callbacks sum the listeners' gradients into one array per Doc; the
    one given to the last listener then runs ``backprop_layers`` on the sums.

    listeners (Sequence[Model]): all listeners of all downstream components, in pipeline order.
    outputs (List[ElmoOutput]): the biLM's outputs for ``docs``; ``backprop_layers`` is their callback.
    ops (Ops): allocates the gradient sums.
    on_gradient (Callable[[Floats3d], None]): called with every Doc's gradient from every listener.
    after_backprop (Callable[[], None]): called after ``backprop_layers`` (the optimizer step).
    """
    d_layers: List[Floats3d] = [ops.alloc3f(*out.layers.shape) for out in outputs]

    def accumulate_gradient(one_d_layers: Sequence[Floats3d]) -> List[Doc]:
        for total, d in zip(d_layers, one_d_layers):
            total += d
            on_gradient(d)
        return []

    def backprop(one_d_layers: Sequence[Floats3d]) -> List[Doc]:
        accumulate_gradient(one_d_layers)
        d_docs = backprop_layers(d_layers)
        after_backprop()
        return d_docs

    batch_id = get_batch_id(docs)
    for listener in listeners[:-1]:
        listener.receive(batch_id, outputs, accumulate_gradient)
    listeners[-1].receive(batch_id, outputs, backprop)
