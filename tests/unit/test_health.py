"""/healthz: each service reported, checks concurrent and bounded, 503 only when Redis is down.

The probes here are plain functions of our own that answer, fail or hang on demand.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from producers.http import health
from producers.http.health import Probes, ServiceHealth, WorkersHealth
from shared.settings import Settings

QUEUES = ("ingest", "embed", "write", "query", "reconcile")


def up() -> ServiceHealth:
    return ServiceHealth(status="up")


def served(*missing: str) -> Callable[[], WorkersHealth]:
    replies: dict[str, list[dict[str, object]]] = {
        "all@host": [{"name": queue} for queue in QUEUES if queue not in missing],
    }
    return lambda: health.workers_health(replies, QUEUES)


def failing(message: str) -> Callable[[], ServiceHealth]:
    def probe() -> ServiceHealth:
        raise ConnectionError(message)

    return probe


def probes(
    redis: Callable[[], ServiceHealth] = up,
    neo4j: Callable[[], ServiceHealth] = up,
    qdrant: Callable[[], ServiceHealth] = up,
    workers: Callable[[], WorkersHealth] | None = None,
) -> Probes:
    return Probes(redis=redis, neo4j=neo4j, qdrant=qdrant, workers=workers or served())


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Lets a hanging probe's thread end once the test is done with it."""
    event = threading.Event()
    yield event
    event.set()


def test_everything_up_is_ok_with_200() -> None:
    report = asyncio.run(health.check(probes()))

    assert report.status == "ok"
    assert report.down == []
    assert report.http_status == 200
    assert report.workers.queues["write"] == ["all@host"]


def test_neo4j_down_is_degraded_naming_it_and_still_200() -> None:
    report = asyncio.run(health.check(probes(neo4j=failing("Connection refused to 127.0.0.1:7687"))))

    assert report.status == "degraded"
    assert report.down == ["neo4j"]
    assert report.http_status == 200
    assert report.neo4j.status == "down"
    assert "Connection refused" in report.neo4j.detail
    assert report.redis.status == "up"


def test_redis_down_is_503() -> None:
    report = asyncio.run(health.check(probes(redis=failing("Error 111 connecting"))))

    assert report.status == "down"
    assert "redis" in report.down
    assert report.http_status == 503


def test_a_queue_nobody_serves_is_named() -> None:
    report = asyncio.run(health.check(probes(workers=served("embed"))))

    assert report.status == "degraded"
    assert report.down == ["workers:embed"]
    assert report.workers.queues["embed"] == []
    assert "embed" in report.workers.detail


def test_workers_unreachable_are_down_as_a_whole() -> None:
    def unreachable() -> WorkersHealth:
        raise OSError("broker unreachable")

    report = asyncio.run(health.check(probes(workers=unreachable)))

    assert report.workers.status == "down"
    assert "workers" in report.down


def test_a_hanging_probe_is_cut_off_at_the_bound(release: threading.Event) -> None:
    def hangs() -> ServiceHealth:
        release.wait(10)
        return up()

    started = time.monotonic()
    report = asyncio.run(_check_then_release(probes(neo4j=hangs), 0.2, release))

    assert time.monotonic() - started < 1.0
    assert report.neo4j.status == "down"
    assert "no answer within 0.2 s" in report.neo4j.detail
    assert report.status == "degraded"


async def _check_then_release(checks: Probes, timeout_s: float, release: threading.Event) -> health.Health:
    try:
        return await health.check(checks, timeout_s=timeout_s)
    finally:
        release.set()  # else asyncio.run waits for the hanging thread on the way out


def test_checks_run_at_once_not_one_after_another() -> None:
    def slow() -> ServiceHealth:
        time.sleep(0.3)
        return up()

    def slow_workers() -> WorkersHealth:
        time.sleep(0.3)
        return served()()

    started = time.monotonic()
    report = asyncio.run(
        health.check(Probes(redis=slow, neo4j=slow, qdrant=slow, workers=slow_workers), timeout_s=1.0)
    )

    assert time.monotonic() - started < 0.6  # one after another would take 1.2 s
    assert report.status == "ok"
    assert report.redis.ms >= 300


def test_embedded_qdrant_reports_its_folder_without_opening_it(tmp_path: Path) -> None:
    settings = Settings(_env_file=None, data_dir=tmp_path, qdrant_url=None)
    probes = health.default_probes(settings)

    before = probes.qdrant()
    (tmp_path / "qdrant-edge").mkdir()  # the default engine's folder (Edge)
    after = probes.qdrant()
    probes.close()

    assert before.status == after.status == "embedded"
    assert "not created yet" in before.detail
    assert after.detail.endswith("exists")
    assert str(tmp_path / "qdrant-edge") in after.detail
    assert list((tmp_path / "qdrant-edge").iterdir()) == []  # nothing opened or created in it


def _qdrant_server(answers: dict[str, int], seen: list[httpx.Request]) -> httpx.MockTransport:
    """A Qdrant server: each path answers its status; /readyz asks for no key, as Qdrant's does."""

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(answers.get(request.url.path, 404), json={})

    return httpx.MockTransport(handle)


def test_qdrant_server_is_asked_with_its_api_key(tmp_path: Path) -> None:
    # Given a Qdrant server and its key
    settings = Settings(
        _env_file=None, data_dir=tmp_path, qdrant_url="http://qdrant:6333", qdrant_api_key="qdrant-key"
    )
    seen: list[httpx.Request] = []
    transport = _qdrant_server({"/readyz": 200, "/collections": 200}, seen)

    # When it is probed
    probes = health.default_probes(settings, qdrant_transport=transport)
    result = probes.qdrant()
    probes.close()

    # Then every request carried the key, and an authenticated one was made
    assert result.status == "up" and result.detail == "server http://qdrant:6333"
    assert [r.url.path for r in seen] == ["/readyz", "/collections"]
    assert all(r.headers["api-key"] == "qdrant-key" for r in seen)


@pytest.mark.parametrize(("key", "hint"), [(None, "set ENGRAM_QDRANT_API_KEY"), ("wrong", "check")])
def test_a_qdrant_key_refused_is_down_naming_the_setting(tmp_path: Path, key: str | None, hint: str) -> None:
    # Given a server that is ready but refuses the key (or its absence)
    settings = Settings(
        _env_file=None, data_dir=tmp_path, qdrant_url="http://qdrant:6333", qdrant_api_key=key
    )
    transport = _qdrant_server({"/readyz": 200, "/collections": 401}, [])

    probes = health.default_probes(settings, qdrant_transport=transport)
    result = probes.qdrant()
    probes.close()

    assert result.status == "down"
    assert "API key refused (HTTP 401)" in result.detail and hint in result.detail
    assert "wrong" not in result.detail


def test_embedded_qdrant_is_not_counted_as_down() -> None:
    report = asyncio.run(health.check(probes(qdrant=lambda: ServiceHealth(status="embedded"))))

    assert report.status == "ok"


# The HTTP endpoint, with the probes swapped through FastAPI's dependency overrides.


@pytest.fixture
def http() -> Iterator[Callable[[Probes], TestClient]]:
    from producers.http import app as api
    from producers.http import deps

    def client(checks: Probes) -> TestClient:
        api.app.dependency_overrides[deps.probes] = lambda: checks
        return TestClient(api.app, base_url="http://localhost")

    yield client
    api.app.dependency_overrides.clear()


def test_healthz_answers_200_with_the_typed_body(http: Callable[[Probes], TestClient]) -> None:
    response = http(probes(neo4j=failing("refused"))).get("/healthz")

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "degraded"
    assert body["down"] == ["neo4j"]
    assert set(body) == {"status", "down", "redis", "neo4j", "qdrant", "workers", "primary_lost"}
    assert body["workers"]["queues"]["query"] == ["worker-1"]  # counted, not named, without an admin key
    assert body["primary_lost"] is None


def test_healthz_is_degraded_while_the_reconciler_finds_the_primary_lost(
    http: Callable[[Probes], TestClient],
) -> None:
    reason = "primary_lost: Neo4j holds 3 memories but Qdrant holds 900 points; run engram restore"

    def neo4j() -> ServiceHealth:
        return ServiceHealth(status="up", detail=reason)

    body = http(probes(neo4j=neo4j)).get("/healthz").json()

    assert (body["status"], body["down"], body["primary_lost"]) == ("degraded", [], reason)


def test_healthz_answers_503_when_redis_is_down(http: Callable[[Probes], TestClient]) -> None:
    response = http(probes(redis=failing("refused"))).get("/healthz")

    assert response.status_code == 503
    assert response.json()["status"] == "down"
