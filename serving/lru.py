"""A small least-recently-used map, bounded by its number of entries (one per worker).

>>> cache = Lru(2)
>>> cache.put("a", 1); cache.put("b", 2); cache.get("a"); cache.put("c", 3)
1
>>> cache.get("b") is None, cache.get("a"), len(cache)
(True, 1, 2)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

__all__ = ["Lru"]


class Lru:
    """At most ``entries`` values; putting one more forgets the least recently used."""

    def __init__(self, entries: int) -> None:
        self.entries = entries
        self._items: OrderedDict[Hashable, Any] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: Hashable) -> Any | None:
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
        return found

    def put(self, key: Hashable, value: Any) -> None:
        if self.entries <= 0:
            return
        self._items[key] = value
        self._items.move_to_end(key)
        if len(self._items) > self.entries:
            self._items.popitem(last=False)
