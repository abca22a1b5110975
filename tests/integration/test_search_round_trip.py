"""What a queued search costs Redis, recorded with MONITOR on the real stack.

The query worker (``-Q query`` alone, as ops runs it) keeps no unacknowledged copy of a search's
message and stores its result for ``SEARCH_RESULT_TTL_S``; the client deletes a read result with
its next ping, and the HTTP app beside its answer, neither on the answer's way back.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis
from fastapi.testclient import TestClient

from producers.client import EngramClient
from shared.models import SearchRequest
from shared.settings import Settings
from tests.integration.support import Workers
from workers.query import SEARCH_RESULT_TTL_S

pytestmark = pytest.mark.integration


@contextmanager
def monitored(redis_client: redis.Redis) -> Iterator[list[str]]:
    """Every command Redis runs meanwhile, as MONITOR prints it (the list fills as they come)."""
    commands: list[str] = []
    marker = f"monitor-end-{uuid.uuid4()}"
    started = threading.Event()

    def record() -> None:
        with redis_client.monitor() as monitor:
            started.set()
            for line in monitor.listen():
                if marker in line["command"]:
                    return
                commands.append(line["command"])

    reader = threading.Thread(target=record, daemon=True)
    reader.start()
    assert started.wait(5)
    time.sleep(0.2)  # MONITOR is on once Redis has answered it
    try:
        yield commands
    finally:
        redis_client.echo(marker)
        reader.join(10)
        assert not reader.is_alive()


def search_commands(commands: list[str], task_id: str) -> list[str]:
    return [c for c in commands if task_id in c]


def test_a_client_search_keeps_no_unacked_copy_and_its_result_goes_with_the_next_ping(
    workers: Workers, settings: Settings, redis_client: redis.Redis, tenant: str
) -> None:
    client = EngramClient(settings)
    request = SearchRequest(query="what did the team decide", user_id=tenant, top_k=3, method="vector")
    client.search(request)  # the worker's model and connections are warm from here on
    client.ping()
    try:
        # When one search is sent and answered
        with monitored(redis_client) as commands:
            answer = client.search(request)
        assert answer.count == 0  # the tenant has nothing: the answer still comes back
        stored = [c for c in commands if c.startswith("SETEX") and "celery-task-meta-" in c]
        assert len(stored) == 1, commands
        task_id = stored[0].split()[1].removeprefix("celery-task-meta-")
        key = f"celery-task-meta-{task_id}"

        # Then its message was never copied for redelivery, its result is kept a minute, not an hour
        assert not [c for c in search_commands(commands, task_id) if c.startswith(("HSET", "ZADD"))]
        assert stored[0].split()[2] == str(SEARCH_RESULT_TTL_S)
        # And the client did not delete it on the answer's way back, but does with its next ping
        assert not [c for c in commands if c.startswith("DEL")]
        assert redis_client.exists(key) == 1
        assert 0 < redis_client.ttl(key) <= SEARCH_RESULT_TTL_S
        client.ping()
        assert redis_client.exists(key) == 0
    finally:
        client.close()


def test_a_result_read_last_goes_when_the_client_closes(
    workers: Workers, settings: Settings, redis_client: redis.Redis, tenant: str
) -> None:
    client = EngramClient(settings)
    with monitored(redis_client) as commands:
        client.search(SearchRequest(query="anything at all", user_id=tenant, top_k=3, method="vector"))
    stored = next(c for c in commands if c.startswith("SETEX") and "celery-task-meta-" in c)
    key = stored.split()[1]
    assert redis_client.exists(key) == 1
    client.close()
    assert redis_client.exists(key) == 0


def test_the_http_app_deletes_a_read_result_beside_its_answer(
    api: TestClient, redis_client: redis.Redis, tenant: str
) -> None:
    body = {"query": "where is the meeting", "user_id": tenant, "top_k": 3, "method": "vector"}
    assert api.post("/api/memory/semantic-search", json=body).status_code == 200
    with monitored(redis_client) as commands:
        response = api.post("/api/memory/semantic-search", json=body)
        assert response.status_code == 200, response.text
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not [c for c in commands if c.startswith("DEL")]:
            time.sleep(0.05)
    stored = next(c for c in commands if c.startswith("SETEX") and "celery-task-meta-" in c)
    key = stored.split()[1]
    assert f"DEL {key}" in commands
    assert redis_client.exists(key) == 0
