"""``engram bench`` at a tiny size against the test stack: every figure the JSON promises is there,
and each is a number measured on this run (it agrees with the store, and differs between what was
measured apart), not a constant.

The bench runs in this process (``engram bench --running``), against the test Redis, Neo4j and
workers, with the HTTP app served by ``engram serve`` on the test API port. Neo4j is not stopped:
the fallback phase runs only on the bench's own stack.
"""

from __future__ import annotations

import importlib.util
import json
import math
import uuid
from collections.abc import Iterator
from pathlib import Path

import neo4j
import pytest

from producers import cli
from producers.bench import instant
from shared.ids import document_key
from shared.models import DocumentIn, SearchFilters
from shared.settings import Settings
from tests.integration.served import engram_serving
from tests.integration.support import DIMENSION, Workers

pytestmark = pytest.mark.integration

SIZES = (40, 80)


@pytest.fixture(scope="module")
def app_url(settings: Settings, workers: Workers) -> Iterator[str]:
    port = settings.api_port
    log = settings.data_dir / "logs" / "test-bench-api.log"
    with engram_serving(["serve", "--host", "127.0.0.1", "--port", str(port)], port, log, "/healthz") as url:
        yield url


def _number(value: object) -> float:
    assert isinstance(value, int | float) and not isinstance(value, bool), value
    assert math.isfinite(value), value
    return float(value)


def _forget(settings: Settings, driver: neo4j.Driver, prefix: str) -> None:
    """The bench's tenants forgotten in both stores: their titles (Debian package names, repeated
    across a description's paragraphs) would stand in the way of a later test's constraint on them
    (test_integrity makes Document.title unique for a moment)."""
    from producers.client import EngramClient

    rows, _, _ = driver.execute_query(
        "MATCH (d:Document) WHERE d.user_id STARTS WITH $prefix RETURN DISTINCT d.user_id AS user",
        prefix=prefix,
    )
    client = EngramClient(settings)
    try:
        for row in rows:
            client.delete_where(row["user"], SearchFilters(), everything=True)
    finally:
        client.close()


def test_bench_json_holds_measured_figures(
    app_url: str,
    neo4j_driver: neo4j.Driver,
    settings: Settings,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    # Given the running test stack and its HTTP app
    out = tmp_path / "bench.json"
    args = ["bench", "--running", "--url", app_url, "--sizes", ",".join(map(str, SIZES))]
    args += ["--searches", "5", "--throughput-seconds", "1", "--json", str(out)]

    # When the bench runs at two tiny sizes
    assert cli.main(args) == 0

    # Then the JSON holds the figures the issue names, each a finite number
    result = json.loads(out.read_text())
    prefix = result["tenant_prefix"]
    request.addfinalizer(lambda: _forget(settings, neo4j_driver, prefix))
    assert _number(result["ingest"]["ratio"]) > 0
    for size in SIZES:
        search = result["search"][str(size)]
        floor, p50, p99 = (_number(search[k]) for k in ("floor_p50_ms", "p50_ms", "p99_ms"))
        assert floor > 0 and 0 < p50 <= p99
        assert _number(search["vector"]["p50_ms"]) > 0 and _number(search["http"]["p50_ms"]) > 0
        # and where a vector search's time goes: the search's own read and the search without its
        # queue, timed in the same loop, and a hop to Redis and to Neo4j, hot and after idle
        parts = search["parts"]
        assert _number(parts["index_read"]["p50_ms"]) > 0 and _number(parts["searched_here"]["p50_ms"]) > 0
        assert parts["index_read"]["n"] == parts["searched_here"]["n"] == search["vector"]["n"]
        for hop in ("idle_ms", "redis_hot_ms", "redis_idle_ms", "neo4j_hot_ms", "neo4j_idle_ms"):
            assert _number(parts["wake_up"][hop]) > 0

    # and they are this run's: the chunks counted are the Memories the store holds for its tenants
    stored, _, _ = neo4j_driver.execute_query(
        "MATCH (m:Memory) WHERE m.user_id STARTS WITH $prefix RETURN m.user_id AS user, count(m) AS n",
        prefix=prefix,
    )
    held = {row["user"]: row["n"] for row in stored}
    # (the warm-up's tenant and the write -> searchable phase's are the run's too, so forgotten with
    # it, but not the ingestion measured)
    apart = {f"{prefix}-warmup", f"{prefix}-w2s"}
    measured = {user: n for user, n in held.items() if user not in apart}
    assert apart <= set(held)
    assert result["ingest"]["chunks"] == sum(measured.values()) > 0
    assert [step["size"] for step in result["ingest"]["steps"]] == list(SIZES)
    assert all(step["failed_documents"] == 0 for step in result["ingest"]["steps"])
    for tenant in result["tenants"].values():
        assert tenant["memories"] == held[tenant["tenant"]]
        assert tenant["complete"] is (tenant["incomplete"] == 0)
    # latencies measured apart differ (a constant would repeat)
    latencies = {result["search"][str(s)][k] for s in SIZES for k in ("floor_p50_ms", "p50_ms", "p99_ms")}
    assert len(latencies) == 3 * len(SIZES)
    assert result["ingest"]["steps"][0]["cpu_s"]["worker embed"] > 0
    # the model's CPU a chunk measured alone, and the stack's outside it, over all and per size
    assert _number(result["ingest"]["raw_cpu_ms_per_chunk"]) > 0
    _number(result["ingest"]["stack_cpu_ms_per_chunk"])
    for step in result["ingest"]["steps"]:
        assert _number(step["raw_cpu_ms_per_chunk"]) > 0
        outside = _number(step["stack_cpu_ms_per_chunk"])
        assert outside == pytest.approx(step["cpu_ms_per_chunk"] - step["raw_cpu_ms_per_chunk"], abs=0.06)
        # the model's CPU as the embed workers counted it, a part of what the stack spent, and the
        # bench's own CPU while it waited
        model = _number(step["model_cpu_ms_per_chunk"])
        assert 0 < model < step["cpu_ms_per_chunk"]
        assert _number(step["outside_model_cpu_ms_per_chunk"]) == pytest.approx(
            step["cpu_ms_per_chunk"] - model, abs=0.06
        )
        assert _number(step["waiter_cpu_s"]) > 0

    # and the other phases measured something real: every write -> searchable round is a document
    # the phase posted, found by a search of its own after the post
    searchable = result["write_to_searchable"]
    posted, _, _ = neo4j_driver.execute_query(
        "MATCH (d:Document {user_id: $user}) RETURN count(d) AS n", user=f"{prefix}-w2s"
    )
    assert searchable["n"] == posted[0]["n"] == 20
    assert 0 < _number(searchable["p50_ms"]) <= _number(searchable["p95_ms"]) <= _number(searchable["max_ms"])
    assert searchable["searches"] >= searchable["n"]
    # each round's time kept in order, the same rounds the percentiles were taken of
    assert len(searchable["rounds_ms"]) == 20
    assert max(searchable["rounds_ms"]) == pytest.approx(searchable["max_ms"], abs=0.1)
    assert [level["clients"] for level in result["throughput"]] == [1, 8, 32]
    assert all(_number(level["per_s"]) > 0 and level["failed"] == 0 for level in result["throughput"])
    for level in result["throughput"]:  # what a search cost the processes that serve it
        assert {"api", "worker query", "neo4j"} <= set(level["cpu_ms_per_search"])
        assert _number(level["stack_cpu_ms_per_search"]) >= _number(level["cpu_ms_per_search"]["neo4j"]) > 0
    assert 0.0 <= _number(result["recall"]["recall_at_10"]) <= 1.0
    assert result["recall"]["memories"] >= sum(held.values())
    repair = result["reconcile"]["repair"]
    assert repair["failed"] == sum(held.values()) and repair["left_unsynced"] == 0
    assert _number(result["reconcile"]["scan"]["seconds"]) > 0
    roles = {p["role"] for p in result["rss"]}
    assert {"redis", "neo4j", "worker query", "worker embed"} <= roles
    assert all(_number(p["rss_mib"]) > 0 for p in result["rss"])
    assert "fallback" not in result
    # (the instant embedder's run restarts the workers: on the bench's own stack only; tested below)
    assert "instant" not in result["ingest"]
    verdicts = {t["target"]: t["verdict"] for t in result["targets"]}
    assert verdicts["fallback p50 ms, Neo4j down"] == "NOT MEASURED"
    assert verdicts["instant embedder chunks/s"] == "NOT MEASURED"
    own_stack_only = ("fallback p50 ms, Neo4j down", "instant embedder chunks/s")
    assert {v for k, v in verdicts.items() if k not in own_stack_only} <= {"PASS", "MISS"}
    if importlib.util.find_spec("matplotlib") is not None:
        assert out.with_suffix(".png").stat().st_size > 0


def test_instant_embedder_run_measures_the_stack_without_a_model(
    workers: Workers, neo4j_driver: neo4j.Driver, settings: Settings, request: pytest.FixtureRequest
) -> None:
    # Given documents of a tenant of their own, and the embed worker restartable on other settings
    from producers.client import EngramClient

    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    request.addfinalizer(lambda: _forget(settings, neo4j_driver, prefix))
    paragraph = "Tokenised words for the instant embedder, repeated to make more than one chunk. "
    documents = [
        DocumentIn(
            user_id=f"{prefix}-instant", id=f"doc-{i}", text=f"document {i}. " + paragraph * (i % 7 + 1) * 9
        )
        for i in range(24)
    ]
    restarts: list[dict[str, str]] = []

    def restart(extra: dict[str, str]) -> None:
        restarts.append(extra)
        workers.restart("embed", **extra)

    client = EngramClient(settings)
    request.addfinalizer(client.close)

    # When the bench's instant phase runs the pipeline against its stub TEI server
    result = instant.measure(client, settings.data_dir, documents, DIMENSION, restart, lambda _: None, 300.0)

    # Then every measured chunk went through the stub and is stored, none failed
    measured = documents[24 - result["documents"] :]
    rows, _, _ = neo4j_driver.execute_query(
        "MATCH (d:Document)-[:HAS_CHUNK]->(m:Memory) WHERE d.id IN $keys RETURN count(m) AS n",
        keys=[document_key(d.user_id, d.document_id) for d in measured],
    )
    assert result["failed_documents"] == 0 and result["documents"] == 24 - 24 // 4
    assert result["chunks"] == rows[0]["n"] == result["embedder_texts"] > result["documents"]
    # and the figures are this run's: a rate, and the stack's CPU with the embed worker's in it
    assert _number(result["chunks_per_s"]) > 0
    assert result["chunks_per_s"] == pytest.approx(result["chunks"] / result["seconds"], rel=0.01)
    assert _number(result["stack_cpu_ms_per_chunk"]) > 0 and result["cpu_s"]["worker embed"] > 0
    # and the worker was pointed at the stub, then put back as configured
    assert restarts[0]["ENGRAM_EMBEDDING_BACKEND"] == "tei" and restarts[-1] == {}
