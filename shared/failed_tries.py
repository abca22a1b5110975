"""Counts failed key checks per client address and per key id, in Redis, to answer 429 past a bound.

A sign-in form or a Bearer header that fails costs the guesser nothing, and each guess of a new
key id was a Neo4j read (issue 25: 1,577 sign-ins in 20 s, 794 Bearer guesses in 10 s, no 429).
Failures are counted in Redis, so every app process agrees: past ``ENGRAM_AUTH_FAILURES_PER_ADDRESS``
from one address, or ``ENGRAM_AUTH_FAILURES_PER_KEY`` naming one key id, within
``ENGRAM_AUTH_FAILURES_WINDOW_S``, further tries are refused before any key is looked up, until
the window ends. Redis unreachable: nothing is counted or refused (the key check decides alone).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import TypeVar, cast

import redis

from shared.errors import ServiceUnavailable, TooManyFailures, Unauthenticated
from shared.redis_client import translated_errors

log = logging.getLogger(__name__)
T = TypeVar("T")
_PREFIX = "engram:auth:failed:"
_KEY_ID = re.compile(r"egk_([0-9a-f]{16})_")
_SIGNING_KEY_ID = re.compile(r"[0-9a-f]{16}")


def key_id_of(token: str) -> str | None:
    """The key id an ``egk_<id>_<secret>`` token names (a guess names one too)."""
    match = _KEY_ID.match(token)
    return match.group(1) if match else None


def signing_key_id_of(header: str) -> str | None:
    """The key id a signed request's ``X-Engram-Key-Id`` names, if it has a key id's shape (any
    other text is not made into a Redis key: the address still counts it)."""
    return header if _SIGNING_KEY_ID.fullmatch(header) else None


class FailedTries:
    def __init__(self, client: redis.Redis, per_address: int, per_key: int, window_s: int) -> None:
        self._redis = client
        self._per_address = per_address
        self._per_key = per_key
        self._window_s = window_s

    def _subjects(self, address: str | None, key_id: str | None) -> list[tuple[str, int]]:
        found = []
        if address:
            found.append((f"{_PREFIX}addr:{address}", self._per_address))
        if key_id:
            found.append((f"{_PREFIX}key:{key_id}", self._per_key))
        return found

    def blocked_for(self, address: str | None, key_id: str | None) -> int | None:
        """Seconds until this address and key id may try again, or None if they may now."""
        subjects = self._subjects(address, key_id)
        if not subjects:
            return None
        with translated_errors():
            pipe = self._redis.pipeline(transaction=False)
            for name, _ in subjects:
                pipe.get(name)
                pipe.ttl(name)
            replies = cast(list[bytes | int | None], pipe.execute())
        waits = [
            max(1, int(cast(int, replies[2 * i + 1])))
            for i, (_, bound) in enumerate(subjects)
            if replies[2 * i] is not None and int(cast(bytes, replies[2 * i])) >= bound
        ]
        return max(waits) if waits else None

    def failed(self, address: str | None, key_id: str | None) -> None:
        with translated_errors():
            pipe = self._redis.pipeline(transaction=False)
            for name, _ in self._subjects(address, key_id):
                pipe.incr(name)
                pipe.expire(name, self._window_s, nx=True)
            pipe.execute()

    def check(self, address: str | None, key_id: str | None, attempt: Callable[[], T]) -> T:
        """``attempt()`` (a key check), refused with ``TooManyFailures`` while this address or key
        id is over its bound; an ``Unauthenticated`` from it is counted against both."""
        try:
            wait = self.blocked_for(address, key_id)
        except ServiceUnavailable as exc:
            log.warning("failed key checks cannot be counted: %s", exc)
            return attempt()
        if wait is not None:
            raise TooManyFailures(wait)
        try:
            return attempt()
        except Unauthenticated:
            try:
                self.failed(address, key_id)
            except ServiceUnavailable as exc:
                log.warning("a failed key check cannot be counted: %s", exc)
            raise
