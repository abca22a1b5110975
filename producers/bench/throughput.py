"""Searches per second through the HTTP app with 1, 8 and 32 clients searching at once.

Each client is an async loop sending one default search after another (a query of its own each
time) for ``seconds``; answers other than 200 are counted, not retried. Given the stack's data
folder, each level also says what a search cost each of the stack's processes in CPU (the API,
the query worker, Neo4j, Redis): on two cores, searches per second cannot pass 2,000 over the
sum of those milliseconds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from producers.bench.latency import TOP_K
from producers.bench.processes import cpu_by_role, cpu_spent
from producers.bench.stats import Latency

CLIENTS = (1, 8, 32)


async def _level(
    url: str, headers: dict[str, str], user: str, texts: list[str], clients: int, seconds: float
) -> dict[str, Any]:
    latencies: list[float] = []
    failures = 0
    stop = time.monotonic() + seconds
    queue = iter(texts)

    async def client(http: httpx.AsyncClient) -> None:
        nonlocal failures
        while time.monotonic() < stop:
            body = {"query": next(queue), "user_id": user, "top_k": TOP_K}
            started = time.perf_counter()
            answer = await http.post("/api/memory/semantic-search", json=body)
            if answer.status_code == 200:
                latencies.append(time.perf_counter() - started)
            else:
                failures += 1

    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30, limits=limits) as http:
        started = time.monotonic()
        await asyncio.gather(*(client(http) for _ in range(clients)))
        elapsed = time.monotonic() - started
    return {
        "clients": clients,
        "searches": len(latencies),
        "failed": failures,
        "per_s": len(latencies) / elapsed,
        "latency": Latency.of(latencies).as_dict() if latencies else None,
    }


def measure(
    url: str,
    headers: dict[str, str],
    user: str,
    queries: Iterator[str],
    seconds: float,
    data_dir: Path | None = None,
) -> list[dict[str, Any]]:
    results = []
    for clients in CLIENTS:
        texts = [next(queries) for _ in range(int(clients * seconds * 40) + 100)]
        before = cpu_by_role(data_dir) if data_dir is not None else {}
        level = asyncio.run(_level(url, headers, user, texts, clients, seconds))
        if data_dir is not None:
            level.update(cpu_per_search(cpu_spent(before, cpu_by_role(data_dir)), level))
        results.append(level)
    return results


def cpu_per_search(spent: dict[str, float], level: dict[str, Any]) -> dict[str, Any]:
    """The CPU-milliseconds a search cost each role that spent any, and in all (answered or not)."""
    searches = max(1, int(level["searches"]) + int(level["failed"]))
    by_role = {role: round(1000 * s / searches, 2) for role, s in spent.items() if s > 0}
    return {"cpu_ms_per_search": by_role, "stack_cpu_ms_per_search": round(sum(by_role.values()), 2)}
