"""A frozen biLM's layers per segment, kept across calls: ``spacy train`` would otherwise recompute
the same layers every epoch and at every dev evaluation (see ``bilm_model.ElmoBiLM``)."""
from typing import Any, Hashable, Optional, Tuple

import torch
from thinc.api import Model
from thinc.model import deserialize_attr, serialize_attr

from ..fast.lru import LRUCache
from ..fast.versions import WeightsVersion


class FrozenCache:
    """Layers of a frozen biLM per segment (key: the segment's words), least recently used
    evicted first, at most ``max_bytes`` of arrays in all.

    Entries are valid for one state of the weights: ``check`` empties the cache when the
    module, its submodules' classes (and ``precision``), or any parameter or buffer (identity,
    storage, in-place version) is not what the entries were computed with. Weights changed in a way torch does not count (writes through
    ``.data`` or numpy views) need ``clear_frozen_cache``. Stored arrays are never handed out:
    callers get copies. Copies of the cache (``copy.deepcopy``, ``Model.copy``) and serialized
    models start empty.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.hits = 0
        self.misses = 0
        self._entries = LRUCache(max_bytes)  # each entry costs its arrays' bytes
        self._module: Optional[torch.nn.Module] = None
        self._state: Tuple = ()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def n_bytes(self) -> int:
        return self._entries.cost

    def __deepcopy__(self, memo: dict) -> "FrozenCache":
        return FrozenCache(self.max_bytes)

    def clear(self) -> None:
        self._entries.clear()
        self._module = None
        self._state = ()

    def check(self, module: torch.nn.Module, state: WeightsVersion) -> None:
        """Empty the cache unless its entries were computed by this module in this state.

        state (WeightsVersion): ``weights_version(module)`` now (the forward pass takes it once).
        """
        if module is not self._module or state != self._state:
            self.clear()
            self._module = module
            self._state = state

    def get(self, key: Hashable) -> Optional[Any]:
        """The stored layers of a segment (the caller must copy them), or None."""
        layers = self._entries.get(key)
        if layers is None:
            self.misses += 1
            return None
        self.hits += 1
        return layers

    def put(self, key: Hashable, layers: Any) -> None:
        """Store a copy of a segment's layers, evicting the least recently used over the bound."""
        if key in self._entries or layers.nbytes > self.max_bytes:
            return
        self._entries.put(key, layers.copy(), layers.nbytes)


@serialize_attr.register(FrozenCache)
def _serialize_cache(_: FrozenCache, value: FrozenCache, name: str, model: Model) -> bytes:
    return serialize_attr(value.max_bytes, value.max_bytes, name, model)


@deserialize_attr.register(FrozenCache)
def _deserialize_cache(_: FrozenCache, value: bytes, name: str, model: Model) -> FrozenCache:
    return FrozenCache(deserialize_attr(0, value, name, model))
