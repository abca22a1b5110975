"""Queued search latency at one store size, each against the floor measured in the same loop.

The floor is what no search can avoid: the query's embedding and one Neo4j vector query of
``top_k`` (in this process, through the composition root's search connection). In the same loop,
one query at a time, a search is sent through the client (``EngramClient.search``: Redis, the
query worker, the result backend) and through the HTTP app, for the default method and for
``vector``. Every measurement gets a query of its own: a query worker caches the embeddings of
the queries it has seen, and the floor caches none.
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
KINDS = ("floor", "client default", "client vector", "http default", "http vector")


def floor(container: Container, text: str) -> None:
    vector = container.embedder.embed_query(text)
    container.search_graph.read_rows(FLOOR_QUERY, k=TOP_K, vector=[float(x) for x in vector])


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
    calls: dict[str, Callable[[str], object]] = {
        "floor": lambda text: floor(container, text),
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
    }
