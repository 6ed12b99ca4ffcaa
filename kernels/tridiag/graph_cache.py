"""A small least-recently-used cache of captured CUDA graphs, keyed by what a graph has baked in.

A CUDA graph captured from one solve replays exactly those launches: the device pointers of the system's
rows, of ``x`` and the launch configuration are fixed in it. So a graph can be reused only for the same
arrays (a time stepper solving the same buffers each step) and is keyed by those pointers; a new array means
a new capture. The cache is bounded so that a caller passing a fresh ``out`` each call does not pile up
graphs. Hand-written: ``functools.lru_cache`` caches a function's results, not objects built by a method
that captures work on a stream.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any


class GraphCache:
    """At most ``limit`` entries; ``get(key, build)``: the cached value, or ``build()`` stored, returned."""

    def __init__(self, limit: int = 4):
        if int(limit) < 1:
            raise ValueError(f"graph cache limit={limit} must be at least 1")
        self.limit = int(limit)
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self.builds = 0  # how many captures were made (a test and the benchmark read it)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def get(self, key: Hashable, build: Callable[[], Any]) -> Any:
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key]
        value = build()  # if the build raises, nothing is stored
        self.builds += 1
        self._items[key] = value
        if len(self._items) > self.limit:
            self._items.popitem(last=False)  # the least recently used graph is released
        return value

    def clear(self) -> None:
        self._items.clear()
