"""Metrics and logs of the real stack: ``engram serve`` in a process of its own, the test workers.

A document is ingested over HTTP; ``/metrics`` (admin key) then shows the stages' tasks counted
by the workers' pool processes, the document done, and the requests by route template; a tenant
key gets 403 and no key 401. Every line the app and the workers logged is one JSON object, a
task's lines carry its ids, and the document's text is in none of them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from shared.ids import document_key
from shared.settings import Settings
from tests.integration.support import ROOT, KeyMaker, Workers

pytestmark = pytest.mark.integration

ENGRAM = str(Path(sys.executable).with_name("engram"))
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@dataclass(frozen=True)
class Served:
    url: str
    log: Path
    admin: dict[str, str]


@pytest.fixture(scope="module")
def served(settings: Settings, workers: Workers, keys: KeyMaker) -> Iterator[Served]:
    """``engram serve`` as production runs it, with the services' default log format."""
    log = settings.data_dir / "logs" / "test-observability-api.log"
    env = {k: v for k, v in os.environ.items() if k != "ENGRAM_LOG_FORMAT"}
    url = f"http://127.0.0.1:{settings.api_port}"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [ENGRAM, "serve", "--host", "127.0.0.1", "--port", str(settings.api_port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/healthz", timeout=5)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the app did not start:\n{log.read_text()[-3000:]}") from None
                time.sleep(0.2)
        yield Served(url, log, {"Authorization": f"Bearer {keys(None).key}"})
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def scrape(served: Served) -> tuple[str, Samples]:
    response = httpx.get(f"{served.url}/metrics", headers=served.admin, timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }
    return response.text, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def json_lines(path: Path) -> list[dict[str, Any]]:
    """Every line of a log, each parsed as one JSON object (a line that is not fails the test)."""
    parsed = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            pytest.fail(f"{path.name}:{number} is not JSON: {line[:300]!r}")
        assert isinstance(event, dict) and "event" in event and "level" in event, line
        parsed.append(event)
    return parsed


def test_metrics_move_with_an_ingestion_and_logs_are_json_lines_without_text(
    served: Served, settings: Settings, keys: KeyMaker, tenant: str
) -> None:
    # Given the counters as they stand
    _, before = scrape(served)
    secret = f"Pelican-{uuid.uuid4().hex} sightings near the harbour were logged by the night watch."
    document_id = f"obs-{uuid.uuid4().hex[:8]}"
    tenant_key = keys(tenant).key

    # When a tenant's document is ingested over HTTP and read back until it is done
    with httpx.Client(base_url=served.url, headers={"Authorization": f"Bearer {tenant_key}"}) as http:
        accepted = http.post("/api/documents", json={"id": document_id, "title": "Birds", "text": secret})
        assert accepted.status_code == 202, accepted.text
        deadline = time.monotonic() + 180
        while (state := http.get(f"/api/documents/{document_id}").json()["state"]) not in ("done", "failed"):
            assert time.monotonic() < deadline, "the document did not finish"
            time.sleep(0.3)
        assert state == "done"

    # Then /metrics shows each stage's task counted (by the pool processes, once they reported)
    stages = ("chunk", "embed", "write")
    deadline = time.monotonic() + 30
    while True:
        text, after = scrape(served)
        moved = {
            stage: value(after, "engram_tasks_total", stage=stage, outcome="success")
            - value(before, "engram_tasks_total", stage=stage, outcome="success")
            for stage in stages
        }
        if all(count >= 1 for count in moved.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert all(count >= 1 for count in moved.values()), moved
    assert value(after, "engram_task_duration_seconds_count", stage="write", outcome="success") >= 1
    # ... the requests by route template and status, never by the raw path
    posted = {"method": "POST", "route": "/api/documents", "status": "202"}
    assert (
        value(after, "engram_http_requests_total", **posted)
        == value(before, "engram_http_requests_total", **posted) + 1
    )
    read = {"method": "GET", "route": "/api/documents/{document_id:path}", "status": "200"}
    assert value(after, "engram_http_requests_total", **read) >= 1
    # ... the stores' gauges (read at scrape time; the cache may hold a read from before the ingest)
    assert value(after, "engram_metrics_source_up", source="redis") == 1
    assert value(after, "engram_metrics_source_up", source="neo4j") == 1
    for queue in ("ingest", "embed", "write", "query", "reconcile"):
        assert ("engram_queue_depth", (("queue", queue),)) in after
    assert value(after, "engram_primary_lost") == 0
    assert ("engram_vector_sync_memories", (("state", "synced"),)) in after
    # ... and no tenant, document id or text in any series
    assert tenant not in text and document_id not in text and "Pelican" not in text

    # The stores' gauges, read afresh once the cache has run out, count the document done
    deadline = time.monotonic() + settings.metrics_cache_s + 30
    while value(scrape(served)[1], "engram_documents", state="done") < 1:
        assert time.monotonic() < deadline, "engram_documents{state=done} did not count the document"
        time.sleep(1)

    # A tenant key is refused (403), no key or a wrong one too (401)
    assert httpx.get(f"{served.url}/metrics", headers={"X-API-Key": tenant_key}).status_code == 403
    assert httpx.get(f"{served.url}/metrics").status_code == 401
    assert httpx.get(f"{served.url}/metrics", headers={"X-API-Key": "engram_wrong"}).status_code == 401

    # Every line the app logged is JSON (its access lines among them), with no text in any
    app_lines = json_lines(served.log)
    assert any(line["logger"] == "uvicorn.access" and "/api/documents" in line["event"] for line in app_lines)
    assert not any("Pelican" in json.dumps(line) for line in app_lines)
    # ... and so is every worker's; the chunk task's lines carry its ids, tenant and version
    logs = settings.data_dir / "logs"
    worker_lines = {name: json_lines(logs / f"test-worker-{name}.log") for name in stages_workers()}
    everything = [line for lines in worker_lines.values() for line in lines]
    assert not any("Pelican" in json.dumps(line) for line in everything)
    key = document_key(tenant, document_id)
    chunked = [
        line
        for line in worker_lines["ingest"]
        if line.get("tenant") == tenant and line.get("document") == key
    ]
    assert chunked, "no line of the chunk task named its tenant and document"
    assert all(line["stage"] == "chunk" and line["task_id"] and line["version"] >= 1 for line in chunked)
    assert any("succeeded" in line["event"] for line in chunked)
    written = [line for line in worker_lines["write"] if line.get("document") == key]
    assert any(line["stage"] == "write" and line["task_id"] for line in written)


def stages_workers() -> tuple[str, ...]:
    return ("ingest", "embed", "write", "query")
