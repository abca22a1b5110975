"""``/healthz`` in milliseconds: the one slow probe's reading is reused briefly, refreshed behind.

Asking the workers which queues they consume is a Celery broadcast, and a broadcast waits out
its whole timeout for replies (``health.WORKERS_TIMEOUT_S``, half a second): every idle
``/healthz`` took 0.6-0.8 s, and a monitor polling it held a thread of the probes' pool as long.
The Neo4j probe (a session and one read: 30-80 ms on a busy machine) is reused the same way;
Redis's ping and Qdrant's ``/readyz`` take a millisecond and run on every call. A refresh that
fails drops the reading, so the next call probes, and reports the outage, itself.

``Reused`` wraps a probe: a reading younger than ``fresh_s`` is answered as it is; an older one,
up to ``stale_s``, is answered while one refresh runs behind (on a thread of its own); with no
reading, or one older than ``stale_s``, the call waits for a new one, as before. So a worker
that dies shows within about ``fresh_s`` plus one broadcast, and no answer is ever older
than ``stale_s``.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Generic, TypeVar

from producers.http.health import Probes, ServiceHealth

__all__ = ["FRESH_S", "STALE_S", "Reused", "reuse_slow"]

FRESH_S = 2.0
STALE_S = 15.0

H = TypeVar("H", bound=ServiceHealth)


class Reused(Generic[H]):
    """A probe whose reading is reused as the module describes; callable as the probe is."""

    def __init__(
        self,
        probe: Callable[[], H],
        executor: Executor,
        fresh_s: float = FRESH_S,
        stale_s: float = STALE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.probe = probe
        self.executor = executor
        self.fresh_s = fresh_s
        self.stale_s = stale_s
        self.clock = clock
        self._lock = threading.Lock()
        self._reading: tuple[float, H] | None = None
        self._refreshing = False

    def __call__(self) -> H:
        with self._lock:
            reading = self._reading
            age = self.clock() - reading[0] if reading is not None else None
            if reading is not None and age is not None and age < self.stale_s:
                if age >= self.fresh_s and not self._refreshing:
                    self._refreshing = True
                    self.executor.submit(self._refresh)
                return reading[1].model_copy()
        return self._read()

    def _read(self) -> H:
        """A new reading (raises as the probe does: a failure is no reading to reuse)."""
        taken = self.clock()
        result = self.probe()
        with self._lock:
            if self._reading is None or self._reading[0] <= taken:
                self._reading = (taken, result)
        return result.model_copy()

    def _refresh(self) -> None:
        try:
            self._read()
        except Exception:  # the next call past stale_s reads (and reports) it itself
            with self._lock:
                self._reading = None
        finally:
            with self._lock:
                self._refreshing = False


# Refreshes run on a thread of their own: one at a time a probe, never queued behind a check.
_refresher = ThreadPoolExecutor(1, thread_name_prefix="healthz-refresh")


def reuse_slow(probes: Probes, executor: Executor = _refresher) -> Probes:
    """``probes`` with the workers' broadcast and the Neo4j read reused (``Reused``); Redis and
    Qdrant probed each call."""
    return dataclasses.replace(
        probes, workers=Reused(probes.workers, executor), neo4j=Reused(probes.neo4j, executor)
    )
