"""A least-recently-used cache bounded by the characters of its keys, not by their number.

The grounding scorer keeps analysed documents and evidence indexes that answers of a batch share.
Their memory grows with the text they were made from (an index takes about a hundred bytes per
character), and one page may be fifty characters or fifty thousand: a count would bound nothing.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Recent(Generic[K, V]):
    """`make(key)`, remembered for the most recent keys whose `size` adds up to at most `budget`."""

    def __init__(self, make: Callable[[K], V], size: Callable[[K], int], budget: int) -> None:
        self._make = make
        self._size = size
        self._budget = budget
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._total = 0

    def __call__(self, key: K) -> V:
        """The value for `key`, made now unless it is remembered."""
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
            return found[0]
        value = self._make(key)
        size = self._size(key)
        if size <= self._budget:
            self._items[key] = (value, size)
            self._total += size
            while self._total > self._budget:
                _, (_, dropped) = self._items.popitem(last=False)
                self._total -= dropped
        return value

    def __len__(self) -> int:
        return len(self._items)
