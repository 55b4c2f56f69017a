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
from typing import Any, Iterable

from spacy.tokens import Doc
from thinc.api import Model

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
