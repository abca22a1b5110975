"""One restore at a time: a lock in Redis held for a restore's whole life.

Two restores at once shared one checkpoint (issue 25, finding 7). The process that sends a
restore (the HTTP app's ``POST /api/admin/restore``, ``engram restore``) claims the lock with a
token of its own and hands the token to the worker, which keeps the lock alive (``held``: its
expiry refreshed from a thread) while it runs and releases it at the end. A worker that dies
stops refreshing, and the lock frees itself ``ENGRAM_RESTORE_LOCK_TTL_S`` later. A dry run writes
nothing and takes no lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import redis

from shared.errors import EngramError, RestoreRunning
from shared.redis_client import translated_errors

log = logging.getLogger(__name__)
KEY = "engram:restore:lock"

# Only the holder may refresh or release: compare the token, then act, in one step.
_KEEP = """
local held = redis.call('GET', KEYS[1])
if held == false then
  return redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX') and 1 or 0
end
if held == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class RestoreLock:
    def __init__(self, client: redis.Redis, ttl_s: float) -> None:
        self._redis = client
        self._ttl_ms = max(1, int(ttl_s * 1000))

    def claim(self, token: str) -> bool:
        """Takes the lock for a new restore; False while another holds it."""
        with translated_errors():
            return bool(self._redis.set(KEY, token, nx=True, px=self._ttl_ms))

    def keep(self, token: str) -> bool:
        """Refreshes the lock ``token`` holds, or takes it if free (its claim expired while the
        restore waited in the queue); False if another restore holds it."""
        with translated_errors():
            return bool(self._redis.eval(_KEEP, 1, KEY, token, str(self._ttl_ms)))

    def release(self, token: str) -> bool:
        with translated_errors():
            return bool(self._redis.eval(_RELEASE, 1, KEY, token))

    def refuse(self) -> RestoreRunning:
        return RestoreRunning("a restore is running; wait for its end (GET /api/admin/restore shows it)")

    @contextmanager
    def held(self, token: str) -> Iterator[None]:
        """The lock for this restore's life: refreshed every third of its expiry, released after."""
        if not self.keep(token):
            raise self.refuse()
        stop = threading.Event()

        def refresh() -> None:
            while not stop.wait(self._ttl_ms / 3000):
                try:
                    if not self.keep(token):
                        log.warning("restore: the lock was lost to another restore")
                except EngramError as exc:  # a Redis hiccup; the next try may hold it
                    log.warning("restore: the lock not refreshed: %s", exc)

        keeper = threading.Thread(target=refresh, name="restore-lock", daemon=True)
        keeper.start()
        try:
            yield
        finally:
            stop.set()
            keeper.join()
            try:
                self.release(token)
            except EngramError as exc:  # it expires by itself
                log.warning("restore: the lock not released (it expires by itself): %s", exc)
