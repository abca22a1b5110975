"""The HTTP app under many waiting searches: each one bounded from its arrival, /healthz still fast.

The app runs as it does in production, ``engram serve`` (uvicorn) in a process of its own on the
test API port, so its event loop and thread pool are the real ones. The query worker is stopped,
so every search waits until its timeout.
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import redis

from shared.settings import Settings
from tests.integration.support import ROOT, KeyMaker, Workers
from workers.app import QUERY

pytestmark = pytest.mark.integration

TIMEOUT_S = 3.0
MAX_PENDING = 150
ENGRAM = str(Path(sys.executable).with_name("engram"))


@dataclass(frozen=True)
class Server:
    url: str
    headers: dict[str, str]  # an admin key: these tests name the tenant


@pytest.fixture(scope="module")
def server(settings: Settings, workers: Workers, keys: KeyMaker) -> Iterator[Server]:
    log = settings.data_dir / "logs" / "test-api-load.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "ENGRAM_SEARCH_TIMEOUT_S": str(TIMEOUT_S),
        "ENGRAM_API_MAX_PENDING_SEARCHES": str(MAX_PENDING),
        # one tenant stands for many clients here: the process's bound is the one tested
        "ENGRAM_TENANT_MAX_SEARCHES": str(2 * MAX_PENDING),
        # and one client address for many clients: the per-address connection cap is
        # test_served_doors.py's, not this test's
        "ENGRAM_API_MAX_CONNECTIONS_PER_CLIENT": str(4 * MAX_PENDING),
    }
    url = f"http://127.0.0.1:{settings.api_port}"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [ENGRAM, "serve", "--host", "127.0.0.1", "--port", str(settings.api_port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/healthz", timeout=5)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the app did not start:\n{log.read_text()[-3000:]}") from None
                time.sleep(0.2)
        yield Server(url, {"Authorization": f"Bearer {keys(None).key}"})
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def query_worker_stopped(workers: Workers, redis_client: redis.Redis) -> Iterator[None]:
    workers.stop("query")
    try:
        yield
    finally:
        redis_client.delete(QUERY)  # the searches left there expired: nobody need look at them
        workers.start("query")


@dataclass(frozen=True)
class Answer:
    status: int
    seconds: float
    retry_after: str | None = None
    service: str | None = None


async def _search(client: httpx.AsyncClient, tenant: str, i: int) -> Answer:
    started = time.monotonic()
    response = await client.post(
        "/api/memory/semantic-search", json={"query": f"question {i}", "user_id": tenant}
    )
    service = response.json().get("service") if response.status_code == 503 else None
    return Answer(
        response.status_code, time.monotonic() - started, response.headers.get("retry-after"), service
    )


@dataclass(frozen=True)
class Probed:
    health: list[float]
    listing: list[float]  # a route served on the app's thread pool


async def _probe_while(client: httpx.AsyncClient, tenant: str, busy: asyncio.Future[list[Answer]]) -> Probed:
    """Times /healthz and a memory listing, one call after another, until the searches are
    answered."""
    probed = Probed([], [])
    while not busy.done():
        started = time.monotonic()
        response = await client.get("/healthz")
        probed.health.append(time.monotonic() - started)
        assert response.status_code in (200, 503)
        started = time.monotonic()
        response = await client.get("/api/memories", params={"user_id": tenant, "limit": 1})
        probed.listing.append(time.monotonic() - started)
        assert response.status_code == 200, response.text
        await asyncio.sleep(0.1)
    return probed


async def _load(server: Server, tenant: str, searches: int) -> tuple[list[Answer], Probed]:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with (
        httpx.AsyncClient(
            base_url=server.url, headers=server.headers, limits=limits, timeout=60
        ) as searching,
        httpx.AsyncClient(base_url=server.url, headers=server.headers, timeout=60) as probing,
    ):
        busy = asyncio.ensure_future(
            asyncio.gather(*(_search(searching, tenant, i) for i in range(searches)))
        )
        await asyncio.sleep(0.5)  # the searches are in, and waiting
        probed = await _probe_while(probing, tenant, busy)
        return await busy, probed


def test_each_search_times_out_within_its_bound_and_healthz_stays_fast(
    server: Server, tenant: str, query_worker_stopped: None
) -> None:
    # Given no query worker, When 100 searches wait at once while /healthz and a route on the
    # thread pool are called meanwhile
    answers, probed = asyncio.run(_load(server, tenant, 100))

    # Then each is a 504 within its timeout from arrival (plus generous slack for a busy
    # machine), not one after another behind a pool of threads
    assert [a.status for a in answers] == [504] * 100
    slowest = max(a.seconds for a in answers)
    assert slowest < TIMEOUT_S + 3.0, slowest
    assert min(a.seconds for a in answers) > TIMEOUT_S - 0.5
    # And /healthz and the other routes kept answering quickly all along
    assert len(probed.health) >= 2
    assert max(probed.health) < 2.0, probed.health
    assert max(probed.listing) < 2.5, probed.listing


def test_searches_over_the_bound_are_refused_at_once_with_503(
    server: Server, tenant: str, query_worker_stopped: None
) -> None:
    # Given no query worker, When more searches arrive than one app process holds waiting
    answers, _ = asyncio.run(_load(server, tenant, MAX_PENDING + 30))

    # Then those beyond the bound are refused at once (503, retry later), the rest time out
    refused = [a for a in answers if a.status == 503]
    assert {a.status for a in answers} <= {503, 504}
    assert refused, "no search was refused"
    assert sum(a.status == 504 for a in answers) <= MAX_PENDING
    assert all(a.retry_after is not None and a.service == "api" for a in refused)
    # "At once": sooner than those that waited (compared within one run: the client, busy with
    # 180 connections on a loaded machine, adds seconds of its own to both)
    waited = [a.seconds for a in answers if a.status == 504]
    assert statistics.median(a.seconds for a in refused) < statistics.median(waited)


def test_a_search_through_the_served_app_is_answered(server: Server, tenant: str, workers: Workers) -> None:
    # A query worker just started loads its model on its first search, which can take longer
    # than this app's short timeout: a few tries.
    for _ in range(10):
        response = httpx.post(
            f"{server.url}/api/memory/semantic-search",
            json={"query": "anything at all", "user_id": tenant},
            headers=server.headers,
            timeout=30,
        )
        if response.status_code != 504:
            break

    assert response.status_code == 200, response.text
    assert response.json()["count"] == 0
