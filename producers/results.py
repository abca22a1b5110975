"""Awaiting a Celery task's result without holding a thread.

Celery's Redis result backend stores a task's state under ``celery-task-meta-<task id>`` (with any
``global_keyprefix``) and PUBLISHes the same payload on a channel of that name. A waiter here
subscribes to that channel on a connection of its own (``redis.asyncio``), waits for Redis to
confirm the subscription, and only then reads the key: a result stored before the subscription is
found by the read, one stored after it arrives as a message. Nothing is missed, and the wait is a
coroutine, not a thread blocked in ``AsyncResult.get``.

Payloads are decoded by the backend itself (``decode_result``), so a failed task's exception is
rebuilt exactly as ``AsyncResult.get(propagate=True)`` rebuilds it, and raised.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import redis.asyncio as aioredis
import redis.exceptions
from celery import states
from celery.backends.base import Backend
from redis.asyncio.client import PubSub

from shared.errors import ServiceUnavailable
from shared.redis_client import START_HINT

__all__ = ["PendingResult", "ResultWaiter"]


@asynccontextmanager
async def _redis_errors() -> AsyncIterator[None]:
    try:
        yield
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
        raise ServiceUnavailable("redis", str(exc), START_HINT) from exc


class PendingResult:
    """One task's result, watched from before it can be published."""

    def __init__(self, waiter: ResultWaiter, pubsub: PubSub, key: bytes) -> None:
        self._waiter = waiter
        self._pubsub = pubsub
        self._key = key

    async def result(self) -> Any:
        """The task's return value once it is final; raises its exception if it failed or was
        revoked. Waits without bound: the caller puts a timeout around it."""
        async with _redis_errors():
            payload = await self._waiter.redis.get(self._key)
            while True:
                if payload is not None:
                    meta = self._waiter.backend.decode_result(payload)
                    if meta["status"] in states.READY_STATES:
                        return _value(meta)
                message = await self._pubsub.get_message(ignore_subscribe_messages=True, timeout=None)
                payload = None if message is None or message["type"] != "message" else message["data"]


def _value(meta: dict[str, Any]) -> Any:
    """What ``AsyncResult.get(propagate=True)`` gives for a final state: the value, or the raise."""
    if meta["status"] in states.PROPAGATE_STATES:
        error = meta["result"]
        if isinstance(error, BaseException):
            raise error
        raise RuntimeError(f"task ended {meta['status']} without an exception: {error!r}")
    return meta["result"]


class ResultWaiter:
    """Waits for results of Celery's Redis result backend on ``redis.asyncio`` connections.

    Each watch holds one connection of ``redis``'s pool (a subscribed connection cannot serve
    other commands) until it ends: bound the number of watches to bound the connections.
    """

    def __init__(self, redis: aioredis.Redis, backend: Backend) -> None:
        self.redis = redis
        self.backend = backend

    @asynccontextmanager
    async def watch(self, task_id: str) -> AsyncIterator[PendingResult]:
        """Subscribes to the task's channel and yields once Redis has confirmed it: a task sent
        from here on cannot publish its result unseen."""
        key: bytes = self.backend.get_key_for_task(task_id)
        pubsub = self.redis.pubsub()
        try:
            async with _redis_errors():
                await pubsub.subscribe(key)
                while True:  # the confirmation is the first reply on this connection
                    reply = await pubsub.get_message(timeout=None)
                    if reply is not None and reply["type"] == "subscribe":
                        break
            yield PendingResult(self, pubsub, key)
        finally:
            await pubsub.aclose()

    async def forget(self, task_id: str) -> None:
        """Deletes a read result, as ``AsyncResult.forget`` does."""
        async with _redis_errors():
            await self.redis.delete(self.backend.get_key_for_task(task_id))
