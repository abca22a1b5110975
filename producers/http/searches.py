"""The HTTP app's searches: sent to the query queue and awaited without holding a thread.

A search's wait is a coroutine (``producers.http.results``), so thousands can wait on one event loop
while the thread pool stays free for the endpoints that still need it. Three bounds:

- **Time, from arrival.** The caller waits at most ``ENGRAM_SEARCH_TIMEOUT_S`` from the moment the
  request reached the app (``producers.http.arrival``), whatever it queued behind: then 504. The task
  carries that moment as its expiry, so a query worker that picks it up later drops it, and a
  worker that has it uses what is left (``workers.query.deadline``).
- **Waiting searches, per process.** At most ``ENGRAM_API_MAX_PENDING_SEARCHES`` wait at once in
  one app process (each a subscription on the process's one results connection, and memory);
  one more is refused at once with 503 and ``Retry-After`` (``Overloaded``), rather than piling
  up without bound.
- **Searches of one tenant, over every process.** At most ``ENGRAM_TENANT_MAX_SEARCHES`` queued or
  running (``producers.http.tenant_slots``, counted in Redis); one more is refused at once with
  ``TenantBusy`` (429), so one tenant's flood cannot fill the query queue ahead of the others.
  Below it, that count is the search's priority in the queue (``workers.fair_share``): a tenant
  with few searches in flight is served before one with many.
- **Threads for sending.** Celery's ``send_task`` is a blocking Redis call (and retries for a
  while if Redis drops): it runs on at most ``SEND_THREADS`` threads of a limiter of its own, so
  sends never take the threads of the other endpoints, and a sender stuck in retries costs its
  caller only up to the deadline.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import anyio
import anyio.to_thread
import celery.exceptions
from celery import Celery
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from producers.client import queue_errors
from producers.http.results import ResultWaiter
from producers.http.tenant_slots import TenantSlots
from shared.errors import Overloaded, SearchTimeout, ServiceUnavailable
from shared.models import SearchRequest, SearchResponse
from shared.redis_client import connect_async
from shared.settings import Settings
from workers import fair_share
from workers.app import SEARCH_SHOWN, SEARCH_TASK, make_app
from workers.app import app as default_app

__all__ = ["SEND_THREADS", "Searches"]

log = logging.getLogger(__name__)

SEND_THREADS = 8
"""Threads that send search tasks, per app process: a send takes about a millisecond."""
REDIS_CONNECTIONS = 16
"""Connections per app process for reading and deleting results (a read takes one briefly)."""


class Searches:
    """Searches of one app process (one event loop): send, await, bounded."""

    def __init__(
        self, settings: Settings, sender: Celery, waiter: ResultWaiter, slots: TenantSlots | None = None
    ) -> None:
        self._settings = settings
        self.slots = slots if slots is not None else TenantSlots(waiter.commands)
        self._sender = sender
        self._waiter = waiter
        self._pending = 0
        self._send_limiter = anyio.CapacityLimiter(SEND_THREADS)
        self._forgetting: set[asyncio.Task[None]] = set()

    @classmethod
    def connect(cls, settings: Settings) -> Searches:
        """With clients of their own; neither connects before the first search."""
        # A few connections, waited for (the caller's deadline bounds the wait); one quick retry
        # for a pooled connection gone stale, no more: Redis down is a 503 at once.
        commands = connect_async(
            settings,
            max_connections=REDIS_CONNECTIONS,
            socket_connect_timeout=2,
            socket_timeout=5,
            retry=Retry(NoBackoff(), 1),
        )
        # The subscribed connection has no read timeout (it waits for messages as long as there
        # are watches) and no retries (a silent reconnection could lose messages).
        subscriptions = connect_async(settings, socket_connect_timeout=2, retry=Retry(NoBackoff(), 0))
        waiter = ResultWaiter(commands, subscriptions, default_app.backend)
        # Results are awaited here, not by Celery: the sender has no result backend, so sending
        # does not subscribe Celery's own (blocking) result consumer to each task. The decoding
        # is the workers' backend's, so results read exactly as they were stored.
        return cls(settings, make_app(settings, results=False), waiter, TenantSlots(commands))

    async def __aenter__(self) -> Searches:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._forgetting:
            await asyncio.gather(*self._forgetting, return_exceptions=True)
        await self._waiter.aclose()
        self._sender.close()

    async def search(self, request: SearchRequest, arrived: float) -> SearchResponse:
        """The query worker's answer; ``arrived`` is ``time.monotonic()`` when the request came in.

        Raises ``Overloaded`` beyond the bound of waiting searches, ``TenantBusy`` beyond the
        tenant's, ``SearchTimeout`` once the
        timeout from arrival is spent, and whatever the query worker raised (``InvalidInput``,
        ``ServiceUnavailable``, ...), as the blocking client does."""
        limit = self._settings.api_max_pending_searches
        if self._pending >= limit:
            raise Overloaded(
                "api",
                f"{self._pending} searches already wait in this app process "
                f"(ENGRAM_API_MAX_PENDING_SEARCHES={limit}); try again shortly",
            )
        self._pending += 1
        try:
            timeout = self._settings.search_timeout_s
            remaining = arrived + timeout - time.monotonic()
            task_id = str(uuid.uuid4())
            tenant_limit = self._settings.tenant_max_searches
            async with self.slots.held("search", request.user_id, tenant_limit, max(remaining, 0.0)) as held:
                priority = fair_share.priority(held - 1)
                try:
                    async with asyncio.timeout(max(remaining, 0.0)):
                        answer = await self._ask(task_id, request, remaining, priority)
                except TimeoutError as exc:
                    raise SearchTimeout(f"no query worker answered within {timeout:g} s") from exc
        finally:
            self._pending -= 1
        # The read result is deleted beside the answer's way back, not before it.
        forgetting = asyncio.create_task(self._forget(task_id), name="forget-search-result")
        self._forgetting.add(forgetting)
        forgetting.add_done_callback(self._forgetting.discard)
        return SearchResponse.model_validate(answer)

    async def _ask(self, task_id: str, request: SearchRequest, remaining: float, priority: int) -> Any:
        expires = datetime.now(UTC) + timedelta(seconds=max(remaining, 0.0))
        async with self._waiter.watch(task_id) as pending:
            send = partial(self._send, task_id, request.model_dump(mode="json"), expires, priority)
            await anyio.to_thread.run_sync(send, limiter=self._send_limiter, abandon_on_cancel=True)
            try:
                return await pending.result()
            except celery.exceptions.TaskRevokedError as exc:
                # It expired in the queue: the query worker dropped it at the caller's deadline.
                raise TimeoutError(str(exc)) from exc

    def _send(self, task_id: str, request: dict[str, Any], expires: datetime, priority: int) -> None:
        with queue_errors():
            self._sender.send_task(
                SEARCH_TASK,
                args=(request,),
                task_id=task_id,
                expires=expires,
                priority=priority,
                **SEARCH_SHOWN,
            )

    async def _forget(self, task_id: str) -> None:
        """Drops the read result from Redis; the answer stands even if that fails."""
        try:
            await self._waiter.forget(task_id)
        except ServiceUnavailable as exc:
            log.warning("could not drop search result %s: %s", task_id, exc)
