"""One tenant cannot starve another (issue 25): a tenant past its bound of searches in flight gets
429 with ``Retry-After`` while the others are served; the bound is counted in Redis, per tenant.

Through ``engram serve`` in a process of its own and the real query worker (concurrency 2).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from producers.tenant_slots import TenantSlots
from shared.errors import TenantBusy
from shared.redis_client import client_url_and_kwargs
from shared.settings import Settings
from tests.integration.served import serving
from tests.integration.support import KeyMaker, Workers

pytestmark = pytest.mark.integration

TENANT_MAX_SEARCHES = 8
DATES = (("1 may " * 1400)[:8180],)  # and " <n>": 8 KB


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
