"""Awaiting a Celery result without a thread (``producers.http.results``), against the real Redis.

Results are written by Celery's own Redis backend (``store_result``: SET then PUBLISH on the key),
as a worker writes them, and read back the way ``AsyncResult.get(propagate=True)`` would: the
same value, or the same exception, rebuilt.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from celery import states
from celery.result import AsyncResult
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from producers.http.results import ResultWaiter
from shared.errors import InvalidInput, ServiceUnavailable
from shared.redis_client import client_url_and_kwargs
from shared.settings import Settings
from workers.app import app

pytestmark = pytest.mark.integration


def _task_id() -> str:
    return f"test-{uuid.uuid4()}"


def _store_later(task_id: str, value: Any, state: str, delay_s: float) -> threading.Thread:
    """Stores a result from another thread, as a worker would, after a delay."""

    def store() -> None:
        time.sleep(delay_s)
        app.backend.store_result(task_id, value, state)

    thread = threading.Thread(target=store)
    thread.start()
    return thread


def _waiter(settings: Settings) -> ResultWaiter:
    url, credentials = client_url_and_kwargs(settings)
    return ResultWaiter(
        aioredis.Redis.from_url(url, **credentials),
        aioredis.Redis.from_url(url, retry=Retry(NoBackoff(), 0), **credentials),
        app.backend,
    )


async def _wait(settings: Settings, task_id: str, timeout_s: float = 10.0) -> Any:
    waiter = _waiter(settings)
    try:
        async with asyncio.timeout(timeout_s), waiter.watch(task_id) as pending:
            return await pending.result()
    finally:
        await waiter.aclose()


def test_a_result_stored_before_the_wait_is_read(settings: Settings, redis_client: redis.Redis) -> None:
    # Given a result already in the backend (the publication was missed)
    task_id = _task_id()
    app.backend.store_result(task_id, {"answer": 42}, states.SUCCESS)

    # When waiting for it, Then it is read from its key
    assert asyncio.run(_wait(settings, task_id)) == {"answer": 42}


def test_a_result_published_during_the_wait_is_received(
    settings: Settings, redis_client: redis.Redis
) -> None:
    task_id = _task_id()
    worker = _store_later(task_id, ["a", "b"], states.SUCCESS, 0.5)

    started = time.monotonic()
    value = asyncio.run(_wait(settings, task_id))
    worker.join()

    assert value == ["a", "b"]
    assert time.monotonic() - started < 5


def test_a_state_that_is_not_final_is_waited_past(settings: Settings, redis_client: redis.Redis) -> None:
    task_id = _task_id()
    app.backend.store_result(task_id, None, states.STARTED)
    worker = _store_later(task_id, "done", states.SUCCESS, 0.3)

    value = asyncio.run(_wait(settings, task_id))
    worker.join()

    assert value == "done"


@pytest.mark.parametrize(
    "error",
    [
        InvalidInput("search request is malformed: top_k"),
        ServiceUnavailable("neo4j,qdrant", "both stores are down", "start them"),
    ],
)
def test_a_task_error_is_raised_as_asyncresult_get_raises_it(
    settings: Settings, redis_client: redis.Redis, error: Exception
) -> None:
    # Given a task that failed with one of Engram's errors
    task_id = _task_id()
    worker = _store_later(task_id, error, states.FAILURE, 0.2)

    # When awaited, Then the same error comes back, as Celery's own blocking get raises it
    with pytest.raises(type(error)) as awaited:
        asyncio.run(_wait(settings, task_id))
    worker.join()
    with pytest.raises(type(error)) as blocking:
        AsyncResult(task_id, app=app).get(timeout=5, propagate=True)

    assert type(awaited.value) is type(blocking.value) is type(error)
    assert str(awaited.value) == str(blocking.value) == str(error)
    if isinstance(error, ServiceUnavailable):
        assert isinstance(awaited.value, ServiceUnavailable)
        assert awaited.value.service == "neo4j,qdrant"


def test_no_result_is_cut_off_by_the_callers_timeout_and_unsubscribed(
    settings: Settings, redis_client: redis.Redis
) -> None:
    task_id = _task_id()
    channel = app.backend.get_key_for_task(task_id)

    async def wait_then_count_subscribers() -> int:
        waiter = _waiter(settings)
        try:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.5), waiter.watch(task_id) as pending:
                    await pending.result()
            for _ in range(50):  # the UNSUBSCRIBE is sent, not awaited
                if redis_client.pubsub_numsub(channel) == [(channel, 0)]:
                    break
                await asyncio.sleep(0.05)
            return int(redis_client.pubsub_numsub(channel)[0][1])
        finally:
            await waiter.aclose()

    started = time.monotonic()
    subscribers = asyncio.run(wait_then_count_subscribers())

    assert time.monotonic() - started < 5
    assert subscribers == 0


def test_many_watches_share_one_connection(settings: Settings, redis_client: redis.Redis) -> None:
    # Given 50 tasks watched at once, their results stored in any order
    task_ids = [_task_id() for _ in range(50)]

    async def watch_all() -> tuple[list[Any], int]:
        waiter = _waiter(settings)
        try:
            async with contextlib.AsyncExitStack() as stack:
                pending = [await stack.enter_async_context(waiter.watch(t)) for t in task_ids]
                subscribed = [c for c in redis_client.client_list() if int(c.get("sub", 0)) >= 50]
                for i, task_id in reversed(list(enumerate(task_ids))):
                    await asyncio.to_thread(app.backend.store_result, task_id, i, states.SUCCESS)
                async with asyncio.timeout(10):
                    return await asyncio.gather(*(p.result() for p in pending)), len(subscribed)
        finally:
            await waiter.aclose()

    values, connections = asyncio.run(watch_all())

    # Then each gets its own result, all through one subscribed connection
    assert values == list(range(50))
    assert connections == 1


def test_redis_out_of_reach_is_service_unavailable(settings: Settings) -> None:
    unreachable = settings.model_copy(update={"redis_url": "redis://127.0.0.1:9/0"})

    with pytest.raises(ServiceUnavailable) as exc:
        asyncio.run(_wait(unreachable, _task_id()))

    assert exc.value.service == "redis"


def test_forget_deletes_the_stored_result(settings: Settings, redis_client: redis.Redis) -> None:
    task_id = _task_id()
    app.backend.store_result(task_id, 1, states.SUCCESS)

    async def read_and_forget() -> Any:
        waiter = _waiter(settings)
        try:
            async with waiter.watch(task_id) as pending:
                value = await pending.result()
            await waiter.forget(task_id)
            return value
        finally:
            await waiter.aclose()

    assert asyncio.run(read_and_forget()) == 1
    assert redis_client.exists(app.backend.get_key_for_task(task_id)) == 0
