"""Awaiting Celery tasks' results without holding threads.

Celery's Redis result backend stores a task's state under ``celery-task-meta-<task id>`` (with any
``global_keyprefix``) and PUBLISHes the same payload on a channel of that name. A watch here
subscribes to that channel, waits for Redis to confirm the subscription, and only then reads the
key: a result stored before the subscription is found by the read, one stored after it arrives as
a message. Nothing is missed, and the wait is a coroutine, not a thread blocked in
``AsyncResult.get``.

One subscribed connection per waiter (so per app process) serves every watch, as Celery's own
result consumer does: a reader task hands each message to the watch of its channel. Waiting
searches thus cost no connection each; the key reads use a small pool. If that connection fails,
every watch on it fails with ``ServiceUnavailable("redis")`` (messages may have been lost with
it) and the next watch opens a new one.

Payloads are decoded by the backend itself (``decode_result``), so a failed task's exception is
rebuilt exactly as ``AsyncResult.get(propagate=True)`` rebuilds it, and raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
import redis.exceptions
from celery import states
from celery.backends.base import Backend
from redis.asyncio.client import PubSub

from shared.errors import ServiceUnavailable
from shared.redis_client import START_HINT

__all__ = ["PendingResult", "ResultWaiter"]

log = logging.getLogger(__name__)

REDIS_ERRORS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


@asynccontextmanager
async def _redis_errors() -> AsyncIterator[None]:
    try:
        yield
    except REDIS_ERRORS as exc:
        raise ServiceUnavailable("redis", str(exc), START_HINT) from exc


@dataclass
class _Watch:
    """What the reader hands one watch: the subscription's confirmation, then its messages (or
    the error that ended the connection)."""

    subscribed: asyncio.Future[None]
    inbox: asyncio.Queue[bytes | ServiceUnavailable] = field(default_factory=asyncio.Queue)

    def fail(self, error: ServiceUnavailable) -> None:
        if not self.subscribed.done():
            self.subscribed.set_exception(error)
        self.inbox.put_nowait(error)


class PendingResult:
    """One task's result, watched from before it can be published."""

    def __init__(self, commands: aioredis.Redis, backend: Backend, key: bytes, watch: _Watch) -> None:
        self._commands = commands
        self._backend = backend
        self._key = key
        self._watch = watch

    async def result(self) -> Any:
        """The task's return value once it is final; raises its exception if it failed or was
        revoked. Waits without bound: the caller puts a timeout around it."""
        async with _redis_errors():
            payload: bytes | None = await self._commands.get(self._key)
        while True:
            if payload is not None:
                meta = self._backend.decode_result(payload)
                if meta["status"] in states.READY_STATES:
                    return _value(meta)
            item = await self._watch.inbox.get()
            if isinstance(item, ServiceUnavailable):
                raise item
            payload = item


def _value(meta: dict[str, Any]) -> Any:
    """What ``AsyncResult.get(propagate=True)`` gives for a final state: the value, or the raise."""
    if meta["status"] in states.PROPAGATE_STATES:
        error = meta["result"]
        if isinstance(error, BaseException):
            raise error
        raise RuntimeError(f"task ended {meta['status']} without an exception: {error!r}")
    return meta["result"]


class ResultWaiter:
    """Waits for results of Celery's Redis result backend, on one event loop.

    ``commands`` reads and deletes keys; ``subscriptions`` lends the one connection that stays
    subscribed (give it no retries: a silent reconnection could lose messages).
    """

    def __init__(self, commands: aioredis.Redis, subscriptions: aioredis.Redis, backend: Backend) -> None:
        self.commands = commands
        self.backend = backend
        self._subscriptions = subscriptions
        self._pubsub: PubSub | None = None
        self._reader: asyncio.Task[None] | None = None
        self._opening = asyncio.Lock()
        self._watches: dict[bytes, _Watch] = {}

    @asynccontextmanager
    async def watch(self, task_id: str) -> AsyncIterator[PendingResult]:
        """Subscribes to the task's channel and yields once Redis has confirmed it: a task sent
        from here on cannot publish its result unseen."""
        key: bytes = self.backend.get_key_for_task(task_id)
        if key in self._watches:
            raise ValueError(f"task {task_id} is watched already")
        watch = _Watch(asyncio.get_running_loop().create_future())
        self._watches[key] = watch
        pubsub: PubSub | None = None
        try:
            pubsub = await self._listening()
            async with _redis_errors():
                await pubsub.subscribe(key)
            await watch.subscribed
            yield PendingResult(self.commands, self.backend, key, watch)
        finally:
            del self._watches[key]
            if pubsub is not None and pubsub is self._pubsub:
                with contextlib.suppress(*REDIS_ERRORS):
                    await pubsub.unsubscribe(key)

    async def forget(self, task_id: str) -> None:
        """Deletes a read result, as ``AsyncResult.forget`` does."""
        async with _redis_errors():
            await self.commands.delete(self.backend.get_key_for_task(task_id))

    async def aclose(self) -> None:
        reader, pubsub = self._reader, self._pubsub
        self._reader = self._pubsub = None
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
        if pubsub is not None:
            await pubsub.aclose()
        await self._subscriptions.aclose()
        await self.commands.aclose(close_connection_pool=True)  # a pool handed in is kept otherwise

    async def _listening(self) -> PubSub:
        """The subscribed connection and its reader, opened by the first watch to need them."""
        async with self._opening:
            if self._pubsub is None:
                pubsub = self._subscriptions.pubsub()
                async with _redis_errors():
                    await pubsub.connect()
                self._pubsub = pubsub
                self._reader = asyncio.create_task(self._read(pubsub), name="celery-results")
            return self._pubsub

    async def _read(self, pubsub: PubSub) -> None:
        try:
            while True:
                message = await pubsub.get_message(timeout=None)
                watch = None if message is None else self._watches.get(message["channel"])
                if message is None or watch is None:
                    continue
                if message["type"] == "subscribe" and not watch.subscribed.done():
                    watch.subscribed.set_result(None)
                elif message["type"] == "message":
                    watch.inbox.put_nowait(message["data"])
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the connection is gone: so may be messages; every watch fails
            log.warning("the results connection to Redis failed: %s", exc)
            error = ServiceUnavailable("redis", str(exc), START_HINT)
            if self._pubsub is pubsub:
                self._pubsub = self._reader = None
            for watch in list(self._watches.values()):
                watch.fail(error)
            with contextlib.suppress(Exception):
                await pubsub.aclose()
