"""A short cache of what the status page reads from Neo4j (a tenant's counts, its entities).

Sixteen loads of ``/ui`` at once each read the store, and another tenant's API calls waited
behind them (issue 25). A reading is reused for ``ENGRAM_UI_CACHE_S``; loads that ask for the same
reading while it is being read wait for that one read rather than start their own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")


class StoreReadings:
    def __init__(self, cache_s: float, clock: Callable[[], float] = time.monotonic, kept: int = 1024) -> None:
        self._cache_s = cache_s
        self._clock = clock
        self._kept = kept
        self._lock = threading.Lock()
        self._readings: dict[Hashable, tuple[float, Any]] = {}
        self._reading: dict[Hashable, threading.Lock] = {}

    def read(self, key: Hashable, read: Callable[[], T]) -> T:
        """The reading of ``key``: the cached one while fresh, else ``read()`` (once at a time per
        key). An error is not cached: the next load reads again."""
        with self._lock:
            one_at_a_time = self._reading.setdefault(key, threading.Lock())
        with one_at_a_time:
            with self._lock:
                found = self._readings.get(key)
                if found is not None and self._clock() - found[0] < self._cache_s:
                    value: T = found[1]
                    return value
            value = read()
            with self._lock:
                if len(self._readings) >= self._kept:
                    self._readings.clear()
                    self._reading = {k: v for k, v in self._reading.items() if v.locked()}
                self._readings[key] = (self._clock(), value)
            return value
