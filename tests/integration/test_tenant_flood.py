"""One tenant cannot starve another (issue 25): a flood of 8 KB date queries from one tenant leaves
another tenant's searches answered, their p99 within 2x idle's, and a tenant past its bound of
searches in flight gets 429 with ``Retry-After`` while the others are served.

Through ``engram serve`` in a process of its own and the real query worker (one slot here, two
in ops: the harder case), as the issue's attacker saw them. The figures (the other tenant's
p50/p99 idle and under the flood) are written to ``logs/tenant-flood.json`` and printed.

Measured on the shared 2-core machine (load 5-8), idle p50/p99 -> flooded p50/p99, flood answers:
FIFO query queue 111/311 -> 493/1,361 ms (146); with each tenant's fair share
(``workers.fair_share``) 138/552 -> 269/604 (104), 134/819 -> 336/878 (85), 104/650 -> 251/612
(108). A flooded search of the other tenant now waits for the one flood search running, never for
those queued: its p50 is its own time plus half a flood search's (~200 ms). With the time reader
stopping at a query's sixth word that may name a time, a flood search costs what the other tenant's
does (alone: p50 365 ms against its 628, load 32): 628/2,971 -> 646/1,440 (47).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from producers.http.tenant_slots import TenantSlots
from shared.errors import TenantBusy
from shared.redis_client import client_url_and_kwargs
from shared.settings import Settings
from tests.integration.served import serving
from tests.integration.support import KeyMaker, Workers

pytestmark = pytest.mark.integration

FLOOD_S = 30.0
FLOODERS = 3
TENANT_MAX_SEARCHES = 8
NOISE_MS = 50
DATES = ("1 may " * 1400)[:8180], ("1, " * 2731)[:8180]  # and " <n>": 8 KB


@dataclass(frozen=True)
class Tenants:
    url: str
    victim: dict[str, str]
    flooder: dict[str, str]


@pytest.fixture(scope="module")
def served(settings: Settings, workers: Workers, keys: KeyMaker) -> Iterator[Tenants]:
    env = {"ENGRAM_TENANT_MAX_SEARCHES": str(TENANT_MAX_SEARCHES), "ENGRAM_SEARCH_TIMEOUT_S": "20"}
    victim, flooder = (f"flood-{name}-{uuid.uuid4().hex[:8]}" for name in ("victim", "flooder"))
    with serving(settings, env, "test-tenant-flood.log") as port:
        yield Tenants(
            f"http://127.0.0.1:{port}",
            {"Authorization": f"Bearer {keys(victim).key}"},
            {"Authorization": f"Bearer {keys(flooder).key}"},
        )


def _quantiles(seconds: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(seconds, n=100, method="inclusive")
    return {"n": len(seconds), "p50_ms": cuts[49] * 1000, "p99_ms": cuts[98] * 1000}


async def _searches(client: httpx.AsyncClient, until: float, query: str) -> tuple[list[float], list[int]]:
    """One search after another until ``until``: each 200's time, and every other status."""
    took, other = [], []
    i = 0
    while time.monotonic() < until:
        started = time.perf_counter()
        answer = await client.post("/api/memory/semantic-search", json={"query": f"{query} {i}"})
        i += 1
        if answer.status_code == 200:
            took.append(time.perf_counter() - started)
        else:
            other.append(answer.status_code)
    return took, other


async def _victim_idle_then_flooded(tenants: Tenants) -> dict[str, object]:
    timeout = httpx.Timeout(60)
    async with (
        httpx.AsyncClient(base_url=tenants.url, headers=tenants.victim, timeout=timeout) as victim,
        httpx.AsyncClient(base_url=tenants.url, headers=tenants.flooder, timeout=timeout) as flooder,
    ):
        await _searches(victim, time.monotonic() + 3, "warm up the query worker")
        idle, idle_other = await _searches(victim, time.monotonic() + FLOOD_S / 2, "what did we plan")
        # one flood search's own time, the flooder alone on one loop
        alone, alone_other = await _searches(flooder, time.monotonic() + FLOOD_S / 6, DATES[0])
        until = time.monotonic() + FLOOD_S
        floods = [
            asyncio.ensure_future(_searches(flooder, until, DATES[i % len(DATES)])) for i in range(FLOODERS)
        ]
        await asyncio.sleep(1)  # the flood under way
        flooded, flooded_other = await _searches(victim, until, "what did we plan")
        flood = await asyncio.gather(*floods)
    return {
        "idle": _quantiles(idle),
        "flood_alone": _quantiles(alone),
        "flooded": _quantiles(flooded),
        "victim_errors": idle_other + flooded_other,
        "flood_answers": sum(len(took) for took, _ in flood),
        "flood_other": sorted({status for _, other in flood for status in other} | set(alone_other)),
    }


@pytest.fixture(scope="module")
def flood(served: Tenants, settings: Settings) -> dict[str, Any]:
    """One tenant searching alone, then while another sends 8 KB date queries on 3 loops: the
    figures, written and printed."""
    figures = asyncio.run(_victim_idle_then_flooded(served))
    path = settings.data_dir / "logs" / "tenant-flood.json"
    path.write_text(json.dumps(figures, indent=2))
    print(f"\ntenant flood ({FLOODERS} loops of 8 KB date queries, {FLOOD_S:g} s): {json.dumps(figures)}")
    return figures


def test_a_flood_of_date_queries_leaves_every_search_answered(flood: dict[str, Any]) -> None:
    # Then the first tenant's searches were all answered, and the flood's own searches too
    assert flood["victim_errors"] == [], flood
    assert flood["flood_answers"] and flood["flood_other"] == [], flood


def test_a_flood_of_date_queries_leaves_another_tenants_p99_within_twice_idle(flood: dict[str, Any]) -> None:
    # Then the first tenant's p99 under the flood is within 2x its idle p99 (issue 25's bar): it
    # waits for the one flood search running at most (fair shares, workers/fair_share.py), and a
    # flood search costs what its own does (the time reader stops at the sixth word that may name
    # a time, shared/search/timeframe.py). NOISE_MS: one slice lost to another process on a shared
    # 2-core machine (Linux's scheduler gives 3-24 ms slices; two at a p99), never a search's cost.
    # Before: idle p99 60 ms, flooded 173 ms (one flood search alone 153 ms, 2-4x an ordinary one).
    idle, flooded = flood["idle"], flood["flooded"]
    assert flooded["p99_ms"] <= 2 * idle["p99_ms"] + NOISE_MS, flood


async def _burst(tenants: Tenants, searches: int) -> tuple[list[httpx.Response], httpx.Response]:
    async with (
        httpx.AsyncClient(base_url=tenants.url, headers=tenants.flooder, timeout=60) as flooder,
        httpx.AsyncClient(base_url=tenants.url, headers=tenants.victim, timeout=60) as victim,
    ):
        burst = [
            flooder.post("/api/memory/semantic-search", json={"query": f"{DATES[0]} {i}"})
            for i in range(searches)
        ]
        answers = await asyncio.gather(
            *burst, victim.post("/api/memory/semantic-search", json={"query": "hi"})
        )
    return list(answers[:-1]), answers[-1]


def test_a_tenant_past_its_searches_in_flight_gets_429_and_the_others_are_served(served: Tenants) -> None:
    # Given a tenant that sends many more searches at once than its bound
    answers, other = asyncio.run(_burst(served, 6 * TENANT_MAX_SEARCHES))

    # Then those past the bound are refused at once, 429 with Retry-After, the rest answered,
    # and another tenant's search at the same moment is answered
    refused = [answer for answer in answers if answer.status_code == 429]
    assert refused and all(answer.headers["retry-after"] == "1" for answer in refused)
    assert "ENGRAM_TENANT_MAX_SEARCHES" in refused[0].json()["detail"]
    assert {answer.status_code for answer in answers} <= {200, 429}, [
        a.text for a in answers if a.status_code not in (200, 429)
    ]
    assert other.status_code == 200, other.text


def test_slots_are_counted_per_tenant_in_redis_and_lapse_at_their_deadline(settings: Settings) -> None:
    async def run() -> None:
        import redis.asyncio as aioredis

        url, credentials = client_url_and_kwargs(settings)
        client = aioredis.Redis.from_url(url, **credentials)
        slots, other_process = TenantSlots(client), TenantSlots(client)
        tenant = f"slots-{uuid.uuid4().hex[:8]}"
        try:
            # Given a tenant holding its 2 slots, one taken by another process
            async with slots.held("search", tenant, 2, 30), other_process.held("search", tenant, 2, 30):
                # Then a third is refused, in either process, and another tenant is unaffected
                with pytest.raises(TenantBusy):
                    async with slots.held("search", tenant, 2, 30):
                        pass
                async with slots.held("search", f"{tenant}-other", 2, 30):
                    pass
                # And ingest slots are counted apart
                async with slots.held("ingest", tenant, 1, 30):
                    pass
            # When they are given back, a slot is free again
            async with slots.held("search", tenant, 1, 30):
                pass
            # And a slot never given back (its process killed) lapses at its deadline
            held = slots.held("search", tenant, 1, 0.2)
            await held.__aenter__()  # never exited
            with pytest.raises(TenantBusy):
                async with slots.held("search", tenant, 1, 30):
                    pass
            await asyncio.sleep(0.3)
            async with slots.held("search", tenant, 1, 30):
                pass
        finally:
            await client.aclose()

    asyncio.run(run())
