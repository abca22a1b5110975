"""``GET /healthz``: every service Engram depends on, checked at once, each within a bound.

A probe is a blocking function that returns what it saw, or raises when the service is down. All
probes run concurrently in threads and each is cut off after ``timeout_s``, so the answer comes
within about a second whatever is down. The threads are a small pool of the probes' own
(``PROBE_THREADS``), not the app's shared one nor asyncio's default executor: however busy the
app is, a probe never queues behind other work. (A probe that hangs past its bound keeps its
thread until its client's own timeout; with the pool full, later probes report down at their
bound.) The app never opens an embedded Qdrant folder (only one process may, the write worker):
it reports that the folder exists.

Redis down is fatal for the app (nothing can be queued): 503. Anything else down leaves it
useful (documents are still accepted and wait in their queues): 200 with ``status: degraded``
naming what is down.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal, TypeVar

import httpx
import neo4j
import redis
from celery import Celery
from pydantic import BaseModel, Field

from shared.redis_client import connect
from shared.services import census
from shared.settings import Settings
from shared.stores.folders import embedded_folder
from workers.app import QUEUES
from workers.app import app as default_app

TIMEOUT_S = 1.0
# A Celery broadcast waits out its whole timeout for replies: keep it under the bound.
WORKERS_TIMEOUT_S = 0.5
# Four probes a check: room for two checks at once, each thread made only when first needed.
PROBE_THREADS = 8
_executor = ThreadPoolExecutor(PROBE_THREADS, thread_name_prefix="healthz")
PRIMARY_LOST = "primary_lost"
# What the reconciler's last pass found of the primary (shared/services/guard.py), and what the
# primary is now, to hold against the backup's last census (shared/services/census.py).
PRIMARY_QUERY = (
    "OPTIONAL MATCH (s:EngramSchema {id: 'identity'}) "
    "RETURN s.primary_lost AS lost, s.store_id AS store_id, COUNT { MATCH (m:Memory) } AS memories"
)


class ServiceHealth(BaseModel):
    status: Literal["up", "down", "embedded"]
    detail: str = ""
    ms: float = Field(0.0, description="How long the check took.")


class WorkersHealth(ServiceHealth):
    queues: dict[str, list[str]] = Field(
        default_factory=dict, description="Each queue and the workers consuming it."
    )


class Health(BaseModel):
    status: Literal["ok", "degraded", "down"]
    down: list[str] = Field(description="Services down, and workers:<queue> for a queue nobody serves.")
    redis: ServiceHealth
    neo4j: ServiceHealth
    qdrant: ServiceHealth
    workers: WorkersHealth
    primary_lost: str | None = Field(
        None, description="The reconciler found Neo4j is not the store Qdrant was synced with."
    )

    @property
    def http_status(self) -> int:
        return 503 if self.status == "down" else 200

    def without_details(self) -> Health:
        """Names and states only: no address, folder, host or worker name (for a caller who is
        not an admin; /healthz is open)."""
        plain = {"detail": "", "ms": 0.0}
        queues = {
            queue: [f"worker-{i + 1}" for i in range(len(nodes))]
            for queue, nodes in self.workers.queues.items()
        }
        return self.model_copy(
            update={
                "redis": self.redis.model_copy(update=plain),
                "neo4j": self.neo4j.model_copy(update=plain),
                "qdrant": self.qdrant.model_copy(update=plain),
                "workers": self.workers.model_copy(update={**plain, "queues": queues}),
            }
        )


def _nothing_to_close() -> None:
    return None


@dataclass(frozen=True)
class Probes:
    """One blocking check per service; a probe raises when its service is down. ``close`` lets go
    of the clients the probes hold."""

    redis: Callable[[], ServiceHealth]
    neo4j: Callable[[], ServiceHealth]
    qdrant: Callable[[], ServiceHealth]
    workers: Callable[[], WorkersHealth]
    close: Callable[[], None] = _nothing_to_close


H = TypeVar("H", bound=ServiceHealth)


async def check(probes: Probes, timeout_s: float = TIMEOUT_S) -> Health:
    redis_health, neo4j_health, qdrant_health, workers_health = await asyncio.gather(
        _run(probes.redis, ServiceHealth, timeout_s),
        _run(probes.neo4j, ServiceHealth, timeout_s),
        _run(probes.qdrant, ServiceHealth, timeout_s),
        _run(probes.workers, WorkersHealth, timeout_s),
    )
    down = [
        name
        for name, health in (("redis", redis_health), ("neo4j", neo4j_health), ("qdrant", qdrant_health))
        if health.status == "down"
    ]
    if workers_health.status == "down" and not workers_health.queues:
        down.append("workers")
    down += [f"workers:{queue}" for queue, nodes in workers_health.queues.items() if not nodes]
    status: Literal["ok", "degraded", "down"] = "ok"
    lost = neo4j_health.detail if neo4j_health.detail.startswith(PRIMARY_LOST) else None
    if "redis" in down:
        status = "down"
    elif down or lost:
        status = "degraded"
    return Health(
        status=status,
        down=down,
        redis=redis_health,
        neo4j=neo4j_health,
        qdrant=qdrant_health,
        workers=workers_health,
        primary_lost=lost,
    )


async def _run(probe: Callable[[], H], kind: type[H], timeout_s: float) -> H:
    started = time.perf_counter()
    try:
        running = asyncio.get_running_loop().run_in_executor(_executor, probe)
        result = await asyncio.wait_for(running, timeout_s)
    except TimeoutError:
        result = kind(status="down", detail=f"no answer within {timeout_s:g} s")
    except Exception as exc:  # any failure of a probe means its service is down
        result = kind(status="down", detail=_first_line(exc))
    result.ms = round((time.perf_counter() - started) * 1000, 1)
    return result


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200] if text else ''}".rstrip(": ")


# The real probes.


def workers_health(replies: dict[str, list[dict[str, object]]], queues: tuple[str, ...]) -> WorkersHealth:
    """From Celery's ``active_queues`` replies (worker -> queues it consumes) to queue -> workers."""
    served: dict[str, list[str]] = {queue: [] for queue in queues}
    for node, consumed in sorted(replies.items()):
        for queue in consumed:
            name = queue.get("name")
            if isinstance(name, str) and name in served:
                served[name].append(node)
    missing = [queue for queue, nodes in served.items() if not nodes]
    return WorkersHealth(
        status="down" if missing else "up",
        detail=f"no worker consumes {', '.join(missing)}" if missing else "",
        queues=served,
    )


def default_probes(
    settings: Settings,
    app: Celery = default_app,
    queues: tuple[str, ...] = QUEUES,
    qdrant_transport: httpx.BaseTransport | None = None,
) -> Probes:
    """The real probes, with clients of their own (neither connects before its first check).
    ``qdrant_transport`` stands in for the Qdrant server in tests."""
    timeout = TIMEOUT_S
    redis_client = connect(settings, timeout_s=timeout, connect_timeout_s=timeout)
    driver = neo4j.GraphDatabase.driver(
        settings.neo4j_uri,
        auth=(settings.neo4j_user, settings.neo4j_password.get_secret_value()),
        connection_timeout=timeout,
        connection_acquisition_timeout=timeout,
        max_connection_pool_size=2,
    )

    def redis_probe() -> ServiceHealth:
        redis_client.ping()
        return ServiceHealth(status="up")

    def neo4j_probe() -> ServiceHealth:
        # An auto-commit query: the driver does not retry it (execute_query would, for long).
        with driver.session(database=settings.neo4j_database) as session:
            found = session.run(PRIMARY_QUERY).single()
        if found is None:
            return ServiceHealth(status="up")
        lost = found["lost"]
        if not lost:
            try:
                kept = census.load(redis_client)
            except redis.RedisError:  # Redis down: its own probe says so; no census then
                kept = None
            share = settings.reconcile_min_primary_share
            lost = census.looks_lost(kept, int(found["memories"]), found["store_id"], share)
        return ServiceHealth(status="up", detail=str(lost) if lost else "")

    def qdrant_probe() -> ServiceHealth:
        if settings.qdrant_url is None:
            folder = embedded_folder(settings)
            state = "exists" if folder.is_dir() else "is not created yet (no write so far)"
            return ServiceHealth(status="embedded", detail=f"folder {folder} {state}")
        headers = {"api-key": settings.qdrant_api_key.get_secret_value()} if settings.qdrant_api_key else {}
        base = settings.qdrant_url.rstrip("/")
        with httpx.Client(headers=headers, timeout=timeout, transport=qdrant_transport) as client:
            response = client.get(f"{base}/readyz")
            if response.status_code != 200:
                return ServiceHealth(status="down", detail=f"/readyz answered {response.status_code}")
            # /readyz asks for no key: a key the server refuses shows on a call that does.
            response = client.get(f"{base}/collections")
        if response.status_code in (401, 403):
            hint = "check ENGRAM_QDRANT_API_KEY" if settings.qdrant_api_key else "set ENGRAM_QDRANT_API_KEY"
            detail = f"API key refused (HTTP {response.status_code}): {hint}"
            return ServiceHealth(status="down", detail=detail)
        if response.status_code != 200:
            return ServiceHealth(status="down", detail=f"/collections answered {response.status_code}")
        # Which backup answered, for an admin (as the embedded folder's path is).
        return ServiceHealth(status="up", detail=f"server {base}")

    def workers_probe() -> WorkersHealth:
        # A connection of its own (one reused loses replies to the previous call's pending read),
        # polling Redis every 0.1 s rather than 1 s, so closing it does not wait out a long read.
        with app.connection_for_write(transport_options={"polling_interval": 0.1}) as connection:
            connection.ensure_connection(max_retries=0)  # one try: a broadcast would retry for long
            replies = app.control.inspect(timeout=WORKERS_TIMEOUT_S, connection=connection).active_queues()
        return workers_health(replies or {}, queues)

    def close() -> None:
        driver.close()
        redis_client.close()

    return Probes(
        redis=redis_probe, neo4j=neo4j_probe, qdrant=qdrant_probe, workers=workers_probe, close=close
    )
