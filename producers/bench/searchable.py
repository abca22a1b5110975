"""Write -> searchable: how long after a webhook posts a document a search finds it.

Each round posts one new document through the HTTP app (``POST /api/documents``, as n8n does) to
a tenant of the run's own, then searches for its text through the HTTP app, one search after
another, until a result is that document; the time from the post to that answer is the round's.
``ROUNDS`` in a row, one at a time (the queues hold nothing else of the bench's then). A document
not found within ``TIMEOUT_S`` fails the phase: a figure that never came is not a latency.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx

from producers.bench.latency import TOP_K
from producers.bench.stats import Latency

ROUNDS = 20
TIMEOUT_S = 60.0


def _found(http: httpx.Client, user: str, text: str, document_id: str) -> bool:
    body = {"query": text, "user_id": user, "top_k": TOP_K}
    answer = http.post("/api/memory/semantic-search", json=body)
    if answer.status_code == 504:  # the app's bound: searched again
        return False
    answer.raise_for_status()
    return any(hit["document_id"] == document_id for hit in answer.json()["results"])


def measure(http: httpx.Client, user: str, queries: Iterator[str], rounds: int = ROUNDS) -> dict[str, Any]:
    seconds: list[float] = []
    searches = 0
    for _ in range(rounds):
        document_id = f"w2s-{uuid.uuid4().hex[:12]}"
        text = f"{next(queries)} ({document_id})"
        started = time.perf_counter()
        posted = http.post("/api/documents", json={"user_id": user, "id": document_id, "text": text})
        posted.raise_for_status()
        while True:
            searches += 1
            if _found(http, user, text, document_id):
                seconds.append(time.perf_counter() - started)
                break
            if time.perf_counter() - started > TIMEOUT_S:
                raise RuntimeError(f"{document_id} not searchable {TIMEOUT_S:.0f} s after its post")
    rounds_ms = [round(s * 1000.0, 1) for s in seconds]  # in order: a slow first round shows as such
    return {**Latency.of(seconds).as_dict(), "searches": searches, "rounds_ms": rounds_ms}
