"""Search when Neo4j is down: the query worker answers from Qdrant, and says so; both down is a 503.

The query worker alone is restarted against a closed port, so ingestion and the Qdrant folder's
owner (the write worker, which also serves the ``fallback`` queue) stay as they are. With a Qdrant
server the query worker searches the server itself, so "the backup down" is the server stopped
(through ops/qdrant-server, as an operator would) and started again after the test.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient

from shared.errors import ServiceUnavailable
from shared.settings import Settings
from shared.stores.neo4j import Neo4jStore
from tests.integration.facts import LEAVES, ingest_facts, timed_search
from tests.integration.support import ROOT, Workers

pytestmark = [pytest.mark.integration, pytest.mark.backup]

CLOSED_NEO4J = "bolt://127.0.0.1:9"
SLOW_READ = "UNWIND range(1, 200000000) AS x WITH x WHERE x % 7 = 0 RETURN count(x) AS n"


@contextmanager
def backup_down(workers: Workers, settings: Settings) -> Iterator[None]:
    """No backup to fall back on: the embedded folder's owner (the one consumer of the
    ``fallback`` queue) stopped, or the Qdrant server stopped; either back when the block ends."""
    if settings.qdrant_url is None:
        workers.stop("write")
        yield  # the fixture below starts it again
        return
    qdrant_server("stop")
    try:
        yield
    finally:
        qdrant_server("start")


def qdrant_server(command: str) -> None:
    done = subprocess.run(
        [str(ROOT / "ops" / "qdrant-server"), command], cwd=ROOT, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, f"ops/qdrant-server {command}: {done.stdout}{done.stderr}"


@pytest.fixture
def neo4j_down_for_queries(workers: Workers) -> Iterator[Workers]:
    """The query worker can no longer reach Neo4j; everything else runs. Restored afterwards."""
    workers.restart("query", ENGRAM_NEO4J_URI=CLOSED_NEO4J)
    try:
        yield workers
    finally:
        workers.restart("query")
        workers.start("write")  # a no-op unless a test stopped it


def degraded_search(api: TestClient, **body: Any) -> list[str]:
    status, answer, _ = timed_search(api, **body)
    assert status == 200, answer
    assert answer["source"] == "qdrant"
    return [r["document_id"] for r in answer["results"]]


def test_neo4j_down_search_answers_from_qdrant_with_the_same_filters(
    api: TestClient, settings: Settings, tenant: str, neo4j_down_for_queries: Workers
) -> None:
    # Given a tenant's facts, ingested while Neo4j was up (the fixture restarts only the query worker)
    ingest_facts(api, tenant)

    # When Neo4j is unreachable for the query worker and the tenant searches
    status, answer, elapsed = timed_search(api, query=LEAVES, user_id=tenant, top_k=3)

    # Then the answer comes from Qdrant, says why, ranks the right memory first, in time
    assert status == 200, answer
    assert answer["source"] == "qdrant"
    assert answer["degraded"].startswith("neo4j unavailable")
    assert answer["results"][0]["document_id"] == "photosynthesis"
    assert answer["count"] == len(answer["results"]) == 3
    first = answer["results"][0]
    assert 0.3 < first["similarity_score"] <= 1.0
    assert first["project_id"] == "botany" and first["tags"] == ["plants", "science"]
    assert first["created_at"].startswith("2024-06-01")
    assert elapsed < settings.search_timeout_s

    # And another tenant sees nothing of it
    assert degraded_search(api, query=LEAVES, user_id=tenant + "-other", top_k=3) == []

    # And every filter applies as it does in Neo4j
    everything = {"query": "anything", "user_id": tenant, "top_k": 10}
    assert degraded_search(api, **everything, filters={"project_id": "sea"}) == ["tides"]
    assert set(degraded_search(api, **everything, filters={"tags": ["science", "paris"]})) == {
        "photosynthesis",
        "tides",
        "eiffel",
    }
    assert set(degraded_search(api, **everything, filters={"memory_types": ["note"]})) == {
        "sourdough",
        "eiffel",
    }
    assert degraded_search(api, **everything, filters={"document_id": "eiffel"}) == ["eiffel"]
    in_range = {"from_date": "2021-01-01T00:00:00Z", "to_date": "2023-12-31T00:00:00Z"}
    assert set(degraded_search(api, **everything, filters=in_range)) == {"tides", "eiffel"}
    assert degraded_search(api, **everything, filters={"from_date": "2999-01-01T00:00:00Z"}) == []

    # And the threshold cuts on the same cosine
    assert degraded_search(api, query=LEAVES, user_id=tenant, top_k=10, threshold=0.99) == []


def test_neo4j_and_the_fallback_down_is_a_prompt_503_naming_both(
    api: TestClient, settings: Settings, tenant: str, neo4j_down_for_queries: Workers
) -> None:
    # Given Neo4j unreachable for queries and the backup down
    with backup_down(neo4j_down_for_queries, settings):
        # When a tenant searches
        status, answer, elapsed = timed_search(api, query=LEAVES, user_id=tenant, top_k=3)

    # Then a 503 names both, well before the search timeout
    assert status == 503, answer
    assert "neo4j" in answer["service"] and "qdrant" in answer["service"]
    assert "neo4j" in answer["detail"] and "qdrant" in answer["detail"]
    assert elapsed < settings.search_timeout_s / 2


def test_a_search_read_neo4j_does_not_answer_in_half_the_callers_wait_is_stopped(settings: Settings) -> None:
    # Given the searches' store of a process whose callers wait 0.4 s, and a read Neo4j takes
    # seconds over (a held read: an index made again since it was looked at, on 5.26)
    store = Neo4jStore(settings.model_copy(update={"search_timeout_s": 0.4}), one_try_reads=True)
    try:
        # (its connection open and the read planned: on a Neo4j just started, as in the server
        # pass of ops/test, the first connection and plan took over a second of their own)
        store.read_rows("EXPLAIN " + SLOW_READ)
        # When it is read
        started = time.monotonic()
        with pytest.raises(ServiceUnavailable) as stopped:
            store.read_rows(SLOW_READ)
        elapsed = time.monotonic() - started
    finally:
        store.close()

    # Then Neo4j stopped it at its timeout (0.2 s), and the primary is said unavailable, which is
    # what makes a search ask the backup (test_neo4j_down_search_answers_from_qdrant_...)
    assert stopped.value.service == "neo4j"
    assert "ran past its timeout" in stopped.value.detail
    assert elapsed < 0.4 + 1.0  # the timeout, and the round trips of a loaded machine
