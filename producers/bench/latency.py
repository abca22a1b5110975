"""Queued search latency at one store size, each against the floor measured in the same loop.

The floor is what no search can avoid: the query's embedding and one Neo4j vector query of
``top_k`` (in this process, through the composition root's search connection). In the same loop,
one query at a time, a search is sent through the client (``EngramClient.search``: Redis, the
query worker, the result backend) and through the HTTP app, for the default method and for
``vector``. Every measurement gets a query of its own: a query worker caches the embeddings of
the queries it has seen, and the floor caches none.

Where a queued vector search's time goes over the floor is measured in the same loop, in this
process: the floor's work at the search's own read (the query worker's vector source, the tenant at
the fusion pool's k, the k target 4's recall is held at) and the whole vector search without its
queue (``Searcher.search``). And what one hop between processes costs this machine: a Redis PING
and a Neo4j ``RETURN 1``, back to back and after a few idle milliseconds (a virtual CPU left idle
may be halted, and each process a message wakes pays for it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, LiteralString

import httpx

from producers.bench.stats import Latency, timed
from producers.client import EngramClient
from shared.container import Container
from shared.models import SearchMethod, SearchRequest
from shared.search import Searcher
from shared.search.searcher import query_of
from shared.search.text import query_head
from shared.stores.neo4j.schema_queries import VECTOR_INDEX

TOP_K = 10
# A search of the bench waits this long through the client (the app keeps its own bound): on a
# loaded machine a slow answer is a figure to report, not a reason to stop the run.
CLIENT_TIMEOUT_S = 60.0
WARM_S = 300.0
FLOOR_QUERY: LiteralString = (
    "CALL db.index.vector.queryNodes('" + VECTOR_INDEX + "', $k, $vector) YIELD node AS m, score "
    "RETURN m.id AS id, score"
)
KINDS = (
    "floor",
    "index read",
    "searched here",
    "client default",
    "client vector",
    "http default",
    "http vector",
)
WAKE_ROUNDS = 100
IDLE_S = 0.005
"""The pause before a hop measured after idle: longer than a search's own gaps (a process waits
for the next one), shorter than anything a queue or a driver times out in."""


def floor(container: Container, text: str) -> None:
    vector = container.embedder.embed_query(text)
    container.search_graph.read_rows(FLOOR_QUERY, k=TOP_K, vector=[float(x) for x in vector])


def index_read(container: Container, searcher: Searcher, user: str, text: str) -> None:
    """The floor's work as the query worker does it: the query's embedding and the vector source's
    read of the tenant at the fusion pool's k (``Searcher.candidates``, method ``vector``)."""
    s = container.settings
    request = SearchRequest(query=text, user_id=user, top_k=TOP_K, method="vector")
    said = query_head(text, s.search_query_max_words)
    vector = [float(x) for x in container.embedder.embed_query(said)]
    searcher.candidates(query_of(request, said, vector, s), "vector")


def searched_here(searcher: Searcher, user: str) -> Callable[[str], int]:
    """The whole vector search (its reads, fusion, ranking, shaping) without the queue."""

    def search(text: str) -> int:
        request = SearchRequest(query=text, user_id=user, top_k=TOP_K, method="vector")
        return searcher.search(request).count

    return search


def wake_up(container: Container, rounds: int = WAKE_ROUNDS, idle_s: float = IDLE_S) -> dict[str, float]:
    """p50 ms of one Redis PING and one Neo4j ``RETURN 1``, back to back ("hot") and each after
    ``idle_s`` asleep ("idle", said as ``idle_ms``): what a hop to a process that had nothing to
    do costs here."""
    calls: dict[str, Callable[[], object]] = {
        "redis": container.redis.ping,
        "neo4j": lambda: container.search_graph.read_rows("RETURN 1 AS one"),
    }
    found: dict[str, float] = {"idle_ms": 1000 * idle_s}
    for name, call in calls.items():
        for state, pause in (("hot", 0.0), ("idle", idle_s)):
            call()
            seconds = []
            for _ in range(rounds):
                if pause:
                    time.sleep(pause)
                seconds.append(timed(call)[1])
            found[f"{name}_{state}_ms"] = Latency.of(seconds).p50_ms
    return found


def via_client(client: EngramClient, user: str, method: SearchMethod) -> Callable[[str], int]:
    def search(text: str) -> int:
        request = SearchRequest(query=text, user_id=user, top_k=TOP_K, method=method)
        return client.search(request, timeout_s=CLIENT_TIMEOUT_S).count

    return search


def via_http(http: httpx.Client, user: str, method: SearchMethod) -> Callable[[str], int]:
    def search(text: str) -> int:
        body = {"query": text, "user_id": user, "top_k": TOP_K, "method": method}
        answer = http.post("/api/memory/semantic-search", json=body)
        if answer.status_code == 504:  # the app's bound: what its caller waited, counted as such
            return 0
        answer.raise_for_status()
        return int(answer.json()["count"])

    return search


def warm(client: EngramClient, http: httpx.Client, user: str, queries: Iterator[str]) -> None:
    """The query worker's first search loads its model, the app's first opens its connections:
    waited for (a 504 of the app tried again), never timed."""
    deadline = time.monotonic() + WARM_S
    for method in ("engram", "vector"):
        request = SearchRequest(query=next(queries), user_id=user, top_k=TOP_K, method=method)
        client.search(request, timeout_s=WARM_S)
        while True:
            body = {"query": next(queries), "user_id": user, "top_k": TOP_K, "method": method}
            answer = http.post("/api/memory/semantic-search", json=body)
            if answer.status_code != 504 or time.monotonic() > deadline:
                answer.raise_for_status()
                break


def measure(
    container: Container,
    client: EngramClient,
    http: httpx.Client,
    user: str,
    queries: Iterator[str],
    rounds: int,
) -> dict[str, Any]:
    searcher = container.searcher()
    calls: dict[str, Callable[[str], object]] = {
        "floor": lambda text: floor(container, text),
        "index read": lambda text: index_read(container, searcher, user, text),
        "searched here": searched_here(searcher, user),
        "client default": via_client(client, user, "engram"),
        "client vector": via_client(client, user, "vector"),
        "http default": via_http(http, user, "engram"),
        "http vector": via_http(http, user, "vector"),
    }
    for kind in KINDS:  # warm-up: connections, the query worker's first model call
        calls[kind](next(queries))
    seconds: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for n in range(rounds):
        order: Sequence[str] = KINDS[n % len(KINDS) :] + KINDS[: n % len(KINDS)]
        for kind in order:
            text = next(queries)
            seconds[kind].append(timed(lambda: calls[kind](text))[1])  # noqa: B023 (called at once)
    summary = {kind: Latency.of(s) for kind, s in seconds.items()}
    floor_p50 = summary["floor"].p50_ms
    return {
        "floor_p50_ms": floor_p50,
        "floor": summary["floor"].as_dict(),
        "p50_ms": summary["client default"].p50_ms,
        "p95_ms": summary["client default"].p95_ms,
        "p99_ms": summary["client default"].p99_ms,
        "vector": summary["client vector"].as_dict(),
        "http": summary["http default"].as_dict(),
        "http_vector": summary["http vector"].as_dict(),
        "ratio_p50": summary["client default"].p50_ms / floor_p50,
        "vector_ratio_p50": summary["client vector"].p50_ms / floor_p50,
        "http_ratio_p50": summary["http default"].p50_ms / floor_p50,
        "parts": {
            "index_read": summary["index read"].as_dict(),
            "searched_here": summary["searched here"].as_dict(),
            "wake_up": wake_up(container),
        },
    }
