"""Search with Neo4j down for real (the bench's own stack only): the query worker answers from the
backup store. The first search finds Neo4j gone (timed apart); once a search has come back from
the backup, Neo4j is known down and the next ``rounds`` are timed. Neo4j is started again after.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from producers.bench.latency import CLIENT_TIMEOUT_S, TOP_K
from producers.bench.stack import Stack
from producers.bench.stats import Latency, timed
from producers.client import EngramClient
from shared.models import SearchRequest, SearchResponse


def measure(
    stack: Stack,
    client: EngramClient,
    user: str,
    queries: Iterator[str],
    rounds: int,
    say: Callable[[str], None],
) -> dict[str, Any]:
    def search() -> SearchResponse:
        return client.search(SearchRequest(query=next(queries), user_id=user, top_k=TOP_K), CLIENT_TIMEOUT_S)

    say("  fallback: stopping Neo4j")
    stack.neo4j_stop()
    try:
        first, first_s = timed(search)
        deadline = time.monotonic() + 120
        while first.source != "qdrant" and time.monotonic() < deadline:
            first = search()
        if first.source != "qdrant":
            raise RuntimeError("searches still came from Neo4j two minutes after it was stopped")
        seconds: list[float] = []
        answered = 0
        for _ in range(rounds):
            answer, took = timed(search)
            seconds.append(took)
            answered += answer.source == "qdrant" and answer.count > 0
        return {
            "first_search_ms": first_s * 1000,
            "answered_from_backup": answered,
            "degraded": first.degraded,
            **Latency.of(seconds).as_dict(),
        }
    finally:
        say("  fallback: starting Neo4j again")
        started = time.monotonic()
        stack.neo4j_start()
        say(f"  fallback: Neo4j back in {time.monotonic() - started:.0f} s")
