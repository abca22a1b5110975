"""shared/metrics.py: what a task, a search, a reconcile pass and a request count, merged from the
multiprocess files as /metrics serves them; the store gauges and their cache; route templates."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import uuid
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families

from producers.http.app import app
from producers.http.routes.metrics import route_template
from shared import metrics
from shared.settings import Settings, get_settings


def scrape(
    stores: metrics.StoreCollector | None = None,
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(metrics.registry(get_settings(), stores)).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def _count_in_child() -> None:
    metrics.task_ended("engram.embed.embed_batch", "SUCCESS", 0.2, {"chunks": 3})


def test_a_task_counted_in_a_forked_child_is_in_the_parents_scrape() -> None:
    # Given what has been counted so far
    before = scrape()
    # When a pool's child process (forked, as Celery's prefork pool does) counts a task
    child = multiprocessing.get_context("fork").Process(target=_count_in_child)
    child.start()
    child.join(30)
    assert child.exitcode == 0
    # Then the merged files count it, with its duration, whichever process reads them
    after = scrape()
    labels = {"stage": "embed", "outcome": "success"}
    assert value(after, "engram_tasks_total", **labels) == value(before, "engram_tasks_total", **labels) + 1
    count = "engram_task_duration_seconds_count"
    assert value(after, count, **labels) == value(before, count, **labels) + 1


def test_outcomes_stages_and_searches_are_labelled_from_fixed_sets() -> None:
    before = scrape()
    metrics.task_ended("engram.write.write_batch", "RETRY", 0.1, None)
    metrics.task_ended("not.a.task.of.ours", "WEIRD", None, None)
    metrics.task_ended("engram.query.search", "SUCCESS", 0.04, {"method": "bm25", "source": "qdrant"})
    metrics.task_ended("engram.query.search", "SUCCESS", 0.02, {"method": "made-up", "source": "x"})
    after = scrape()

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("engram_tasks_total", stage="write", outcome="retry") == 1
    assert moved("engram_tasks_total", stage="other", outcome="other") == 1
    assert moved("engram_search_duration_seconds_count", method="bm25", source="qdrant") == 1
    assert moved("engram_search_duration_seconds_count", method="other", source="neo4j") == 1
    assert moved("engram_search_duration_seconds_bucket", method="bm25", source="qdrant", le="0.05") == 1


def test_a_reconcile_pass_counts_its_outcome_and_the_drift_it_fixed_by_kind() -> None:
    before = scrape()
    report = {
        "dry_run": False,
        "resynced": 4,
        "deleted": 1,
        "drift_fixed": {"missing_in_qdrant": 2, "stale_in_qdrant": 0, "orphan_points": 3},
        "redelivered": 2,
        "redelivery_given_up": 1,
    }
    metrics.task_ended("engram.reconcile.run", "SUCCESS", 1.5, report)
    metrics.task_ended("engram.reconcile.run", "SUCCESS", 0.5, {**report, "dry_run": True})
    metrics.task_ended("engram.reconcile.run", "SUCCESS", 0.5, {"dry_run": False, "primary_lost": "gone"})
    metrics.task_ended("engram.reconcile.run", "FAILURE", 0.5, RuntimeError("boom"))
    after = scrape()

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("engram_reconcile_passes_total", outcome="applied") == 1
    assert moved("engram_reconcile_passes_total", outcome="dry_run") == 1
    assert moved("engram_reconcile_passes_total", outcome="primary_lost") == 1
    assert moved("engram_reconcile_passes_total", outcome="failed") == 1
    # A dry run fixed nothing, whatever it found
    assert moved("engram_reconcile_drift_fixed_total", kind="missing_in_qdrant") == 2
    assert moved("engram_reconcile_drift_fixed_total", kind="orphan_points") == 3
    assert moved("engram_reconcile_memories_total", action="resynced") == 4
    assert moved("engram_redelivered_messages_total", outcome="resent") == 2
    assert moved("engram_redelivered_messages_total", outcome="given_up") == 1


def test_store_gauges_are_read_once_per_cache_period_and_a_silent_store_is_said() -> None:
    reads: list[float] = []
    now = [100.0]

    def read() -> metrics.Readings:
        reads.append(now[0])
        return metrics.Readings(
            queues={"ingest": 3, "embed": 0},
            documents={"done": 7, "failed": 1},
            primary_lost=True,
            up={"redis": True, "neo4j": False},
        )

    stores = metrics.StoreCollector(read, cache_s=10.0, clock=lambda: now[0])
    first = scrape(stores)
    now[0] += 5
    scrape(stores)
    now[0] += 6
    scrape(stores)

    assert reads == [100.0, 111.0]
    assert value(first, "engram_queue_depth", queue="ingest") == 3
    assert value(first, "engram_documents", state="done") == 7
    assert value(first, "engram_primary_lost") == 1
    assert value(first, "engram_metrics_source_up", source="neo4j") == 0
    # What Neo4j would have said is absent, not a made-up zero
    assert not any(name == "engram_vector_sync_memories" for name, _ in first)


def test_requests_are_named_by_their_route_template_never_their_raw_path() -> None:
    document = f"doc-{uuid.uuid4().hex}"

    def scope(method: str, path: str) -> dict[str, object]:
        return {"type": "http", "method": method, "path": path, "root_path": "", "headers": []}

    routes = app.router.routes
    assert route_template(routes, scope("GET", f"/api/documents/{document}")) == (
        "/api/documents/{document_id:path}"
    )
    assert route_template(routes, scope("POST", "/api/documents")) == "/api/documents"
    assert route_template(routes, scope("GET", "/metrics")) == "/metrics"
    # Routes of included routers too (each carries its router's prefix)
    assert route_template(routes, scope("POST", "/api/admin/restore")) == "/api/admin/restore"
    assert route_template(routes, scope("GET", "/api/entities/Ada")) == "/api/entities/{name:path}"
    assert route_template(routes, scope("PATCH", "/api/documents")) == "/api/documents"
    assert route_template(routes, scope("GET", f"/no/such/{document}")) == "unmatched"


def test_an_embed_task_counts_the_cpu_its_model_calls_took_by_backend() -> None:
    before = scrape()
    metrics.task_ended("engram.embed.embed_batch", "SUCCESS", 0.3, {"model_cpu_s": 0.25, "backend": "local"})
    metrics.task_ended("engram.embed.embed_batch", "SUCCESS", 0.3, {"model_cpu_s": 0.5, "backend": "made-up"})
    metrics.task_ended("engram.embed.embed_batch", "RETRY", 0.3, None)
    after = scrape()

    def moved(**labels: str) -> float:
        name = "engram_embed_model_cpu_seconds_total"
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved(backend="local") == 0.25
    assert moved(backend="other") == 0.5


def test_the_grafana_dashboard_asks_only_for_metrics_that_exist() -> None:
    dashboard = json.loads((Path(__file__).resolve().parents[2] / "docs" / "grafana-engram.json").read_text())
    asked = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"engram_[a-z_]+", target["expr"])
    }
    counted = {
        f"{metric._name}{suffix}"
        for metric in vars(metrics).values()
        if isinstance(metric, MetricWrapperBase)
        for suffix in ("_total", "_bucket", "_count", "_sum")
    }
    full = metrics.Readings(
        queues={"ingest": 0},
        documents={"done": 0},
        vector_sync={"synced": 0},
        oldest_pending_age_s=0.0,
        tombstones=0,
        primary_lost=False,
        neo4j_memories=0,
        qdrant_points=0,
        up={"redis": True},
    )
    gauges = {family.name for family in metrics.StoreCollector(lambda: full, 0).collect()}
    assert asked and asked <= counted | gauges, asked - counted - gauges


def test_a_metrics_folder_that_cannot_be_made_leaves_the_files_as_they_were(tmp_path: Path) -> None:
    # Given a metrics folder under a file (as unmakeable as one on a read-only disk)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    before = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    # When a process asks for multiprocess mode there, it is refused without an error
    assert metrics.enable_multiprocess(Settings(_env_file=None, metrics_dir=blocker / "metrics")) is None
    # Then this process keeps writing where it did
    assert os.environ.get("PROMETHEUS_MULTIPROC_DIR") == before
