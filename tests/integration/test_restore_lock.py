"""One restore at a time (issue 25, finding 7): two admin restores at once shared one checkpoint.

A restore holds a lock in Redis for its life (shared/services/restore_lock.py): taken when it is
sent, kept alive by the worker while it runs, released at its end; a restore whose worker died
frees it when its expiry passes. A second restore meanwhile is a 409, from the HTTP app or the CLI.
"""

from __future__ import annotations

import threading
import time

import httpx
import pytest
import redis
from fastapi.testclient import TestClient

from shared.services.restore_lock import KEY, RestoreLock

pytestmark = [pytest.mark.integration, pytest.mark.backup]


@pytest.fixture(autouse=True)
def no_restore_running(redis_client: redis.Redis) -> None:
    """Each test starts with the lock free: a restore an earlier test sent has ended."""
    deadline = time.monotonic() + 120
    while redis_client.exists(KEY) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not redis_client.exists(KEY), "a restore of an earlier test is still running"


def _post_together(api: TestClient, body: dict[str, object], n: int) -> list[httpx.Response]:
    start = threading.Barrier(n)
    answers: list[httpx.Response] = []

    def post() -> None:
        start.wait()
        answers.append(api.post("/api/admin/restore", json=body))

    threads = [threading.Thread(target=post) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return answers


def test_two_admin_restores_at_once_one_is_refused_with_409_then_the_lock_is_free(
    api: TestClient, tenant: str
) -> None:
    # Given: no restore running
    # When: two admin restores are sent at the same moment
    answers = _post_together(api, {"user_id": tenant, "to": "qdrant"}, 2)

    # Then: one runs, the other is told one is running
    assert sorted(a.status_code for a in answers) == [202, 409], [a.text for a in answers]
    refused = next(a for a in answers if a.status_code == 409)
    assert "restore" in refused.json()["detail"]

    # And once the first has ended, a restore may be sent again (the lock released at its end)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        again = api.post("/api/admin/restore", json={"user_id": tenant, "to": "qdrant"})
        if again.status_code == 202:
            break
        assert again.status_code == 409
        time.sleep(0.5)
    assert again.status_code == 202


def test_a_dry_run_needs_no_lock(api: TestClient, tenant: str) -> None:
    answers = _post_together(api, {"user_id": tenant, "dry_run": True}, 2)
    assert [a.status_code for a in answers] == [202, 202]


def test_a_restore_lock_whose_holder_died_expires(redis_client: redis.Redis) -> None:
    # Given: a lock taken by a process that then died (nothing keeps it alive)
    dead = RestoreLock(redis_client, ttl_s=1)
    assert dead.claim("dead-worker")
    other = RestoreLock(redis_client, ttl_s=1)

    # Then: while it lives nobody else may restore, and once it has expired anybody may
    assert not other.claim("next")
    time.sleep(1.3)
    assert other.claim("next")
    assert not dead.keep("dead-worker")  # the dead holder's token no longer holds it
    other.release("next")


def test_a_kept_lock_outlives_its_expiry_and_is_freed_when_released(redis_client: redis.Redis) -> None:
    lock = RestoreLock(redis_client, ttl_s=1)
    with lock.held("running"):
        time.sleep(1.6)  # longer than the expiry: kept alive meanwhile
        assert not RestoreLock(redis_client, ttl_s=1).claim("second")
    assert RestoreLock(redis_client, ttl_s=1).claim("second")
    lock.release("second")
