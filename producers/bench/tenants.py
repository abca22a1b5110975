"""Tenants of 1%, 10% and 50% of the store, searched in the same store: is every ``top_k``
complete (as many results as asked, or as the tenant holds), and how long does it take?

The threshold is put at its lowest, so a result short of ``top_k`` can only be a candidate the
search did not find, never one it judged too far.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from producers.bench.latency import CLIENT_TIMEOUT_S, TOP_K
from producers.bench.stats import Latency, timed
from producers.client import EngramClient
from shared.models import SearchRequest


def measure(
    client: EngramClient, tenants: Mapping[str, tuple[str, int]], queries: Iterator[str], rounds: int
) -> dict[str, Any]:
    """``tenants``: share label -> (tenant, memories it holds)."""
    found: dict[str, Any] = {}
    for label, (user, held) in tenants.items():
        expected = min(TOP_K, held)
        seconds: list[float] = []
        short = 0
        for _ in range(rounds):
            request = SearchRequest(query=next(queries), user_id=user, top_k=TOP_K, threshold=-1.0)
            answer, took = timed(lambda: client.search(request, CLIENT_TIMEOUT_S))  # noqa: B023 (called at once)
            seconds.append(took)
            short += answer.count < expected
        found[label] = {
            "tenant": user,
            "memories": held,
            "expected": expected,
            "incomplete": short,
            "complete": short == 0,
            **Latency.of(seconds).as_dict(),
        }
    return found
