"""A least-recently-used map bounded by the summed cost of its entries: bytes, or 1 an entry.

The frozen biLM's per-segment layers (``layers.frozen_cache.FrozenCache``, bounded in bytes, which
decides itself what to admit and evicts through ``cost_of`` and ``pop``) and the char-CNN's token
encodings (``char_cache.CharCNNCache``, bounded in entries) both keep theirs here.
It takes no lock: a cache shared between threads holds its own around every call.
"""
from collections import OrderedDict
from typing import Any, Hashable, Optional, Tuple


class LRUCache:
    """Entries evicted least recently used first while their costs sum to more than ``max_cost``.

    max_cost (float): the bound on the summed costs.
    """

    def __init__(self, max_cost: float) -> None:
        self.max_cost = max_cost
        self.cost = 0
        self._entries: "OrderedDict[Hashable, Tuple[Any, float]]" = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def clear(self) -> None:
        self._entries.clear()
        self.cost = 0

    def get(self, key: Hashable) -> Optional[Any]:
        """The value stored under ``key`` (now the most recently used), or None."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def cost_of(self, key: Hashable) -> float:
        """RETURNS (float): the cost of the entry under ``key`` (0 where there is none)."""
        entry = self._entries.get(key)
        return 0 if entry is None else entry[1]

    def pop(self, key: Hashable) -> None:
        """Remove the entry under ``key`` (if there is one)."""
        entry = self._entries.pop(key, None)
        if entry is not None:
            self.cost -= entry[1]

    def put(self, key: Hashable, value: Any, cost: float = 1) -> None:
        """Store ``value`` as the most recently used entry (replacing one under ``key``), then evict
        the least recently used while over the bound (this one too, if it alone exceeds it)."""
        old = self._entries.pop(key, None)
        if old is not None:
            self.cost -= old[1]
        self._entries[key] = (value, cost)
        self.cost += cost
        while self.cost > self.max_cost:
            _, (_, evicted) = self._entries.popitem(last=False)
            self.cost -= evicted
