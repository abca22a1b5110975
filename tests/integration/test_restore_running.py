"""A primary lost and brought back under running workers (issue 24), on a stack of its own.

The stack (tests/faults/stack.py: its own Redis, Neo4j, workers; here also the HTTP app) holds
10,000 memories, seeded the fastest honest way: vectors computed once, written through the store
adapter and synced to Qdrant by the syncer, as the write stage does. Then Neo4j's data is moved
away under the running workers, a key and a newer version of a document are made during the
loss, and ``engram restore`` brings the primary back. A second test kills Redis and Neo4j in turn
and sees each come back by itself (ops/keep.py).
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from producers.client import EngramClient
from shared.auth import signature
from shared.models import utc_now
from shared.services.sync import Syncer
from shared.stores.base import DocumentWrite
from shared.stores.neo4j import Neo4jStore, schema_names
from shared.stores.vectors import connect_vectors
from tests.faults.stack import FaultStack, QdrantServerAddress, wait_for
from tests.unit.fakes import staged
from workers.app import make_app

pytestmark = pytest.mark.integration

DOCUMENTS, CHUNKS = 1000, 10  # 10,000 memories
MODEL, DIMENSION = "all-MiniLM-L6-v2", 384
TENANT = "restore-running"
ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def stack() -> Iterator[FaultStack]:
    data_dir = os.environ.get("ENGRAM_DATA_DIR", "")
    if "engram-test" not in data_dir or "ENGRAM_FAULTS_PORTS" not in os.environ:
        pytest.exit("this test runs through ./ops/test, which gives it ports of its own", 2)
    # Its backup is the test services': embedded, or the Qdrant server ops/test started.
    running = FaultStack.from_env(Path(data_dir) / "restore-running", QdrantServerAddress.from_env())
    try:
        running.open()
        yield running
    finally:
        running.close()


def _seed(stack: FaultStack) -> None:
    """10,000 memories in both stores, with the write worker (Qdrant's owner) paused."""
    rng = random.Random(24)
    basis = [[rng.gauss(0, 1) for _ in range(DIMENSION)] for _ in range(64)]
    stack.stop_worker("write", warm=True)
    graph = Neo4jStore(stack.settings)
    connection = connect_vectors(stack.settings)
    try:
        graph.ensure_schema(MODEL, DIMENSION)
        syncer = Syncer(graph, connection.store, utc_now)
        for start in range(0, DOCUMENTS, 50):
            writes = []
            for n in range(start, start + 50):
                texts = [f"document {n} passage {i} about topic {(n * i) % 97}" for i in range(CHUNKS)]
                doc = staged(f"doc-{n:04d}", 1, texts, TENANT)
                vectors = [basis[(n + i) % 64] for i in range(CHUNKS)]
                writes.append(DocumentWrite(doc, vectors, MODEL))
            outcome = graph.write_documents(writes)
            syncer.sync(outcome.memory_ids)
    finally:
        connection.close()
        graph.close()
    stack.start_worker("write", env={"ENGRAM_RESTORE_BATCH_DOCUMENTS": "20"})


def _serve(stack: FaultStack, port: int) -> subprocess.Popen[bytes]:
    engram = str(Path(sys.executable).with_name("engram"))
    with (stack.logs / "api.log").open("ab") as log:
        process = subprocess.Popen(
            [engram, "serve", "--port", str(port)],
            cwd=ROOT,
            env=stack.env(ENGRAM_API_PORT=str(port), ENGRAM_API_WORKERS="1"),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    if not wait_for(lambda: httpx.get(f"http://127.0.0.1:{port}/healthz").status_code < 600, 90, 0.5):
        process.kill()
        raise RuntimeError("the app did not start; see " + str(stack.logs / "api.log"))
    return process


def _health(api: str) -> dict[str, Any]:
    """/healthz's answer (a probe may time out on a loaded machine: the caller polls)."""
    found: dict[str, Any] = httpx.get(f"{api}/healthz", timeout=30).json()
    return found


def _post(api: str, key: str, document: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{api}/api/documents", json=document, headers={"X-API-Key": key}, timeout=30)


def _state(api: str, key: str, document_id: str) -> str:
    answer = httpx.get(f"{api}/api/documents/{document_id}", headers={"X-API-Key": key}, timeout=30)
    return str(answer.json().get("state"))


def _wipe(stack: FaultStack) -> None:
    stack.neo4j_stop()
    (stack.data_dir / "neo4j" / "data").rename(stack.data_dir / f"neo4j-data-lost-{int(time.time())}")
    stack.neo4j_start()


def _took(step: str, since: float) -> float:
    print(f"restore-running: {step} {time.monotonic() - since:.1f} s", flush=True)
    return time.monotonic()


@pytest.mark.timeout(1500)  # a few minutes alone; the bound leaves room for a loaded machine
@pytest.mark.backup  # restored from the backup; the kill row below is Redis's and Neo4j's alone
def test_a_primary_wiped_under_running_workers_comes_back_whole(stack: FaultStack) -> None:
    # Given 10,000 memories in step, the app running, three keys (one signing, one revoked)
    at = time.monotonic()
    _seed(stack)
    at = _took("seeded 10,000 memories", at)
    client = EngramClient(stack.settings, app=make_app(stack.settings))
    port = _free_port()
    api = f"http://127.0.0.1:{port}"
    app = _serve(stack, port)
    try:
        old = client.create_key("app", TENANT)
        n8n = client.create_key("n8n", TENANT, signing=True)
        revoked = client.create_key("gone", TENANT)
        client.key_store().revoke_key(revoked.info.id, utc_now())
        first = client.reconcile(timeout_s=600)
        assert first["primary_lost"] is None
        at = _took("app up, keys made, a pass", at)

        # When Neo4j's data is lost under the running workers
        _wipe(stack)
        at = _took("Neo4j wiped", at)

        # Then status and /healthz say the primary looks lost at once, before any pass
        lost = client.stores()["primary_lost"]
        assert lost is not None and "engram restore" in lost
        assert wait_for(lambda: _health(api)["primary_lost"], 30, 0.5), _health(api)
        assert _health(api)["status"] == "degraded"

        # When a key is made during the loss and a newer version of a document goes through it
        during = client.create_key("during", TENANT)
        newer = {"id": "doc-0007", "title": "doc-0007", "text": "The newer version written during the loss."}
        assert _post(api, during.key, newer).status_code == 202
        assert wait_for(lambda: _state(api, during.key, "doc-0007") == "done", 120, 0.5)
        at = _took("a key and a document written during the loss", at)

        # And engram restore runs, its progress sampled
        samples: list[tuple[float, int]] = []
        result = client.start_restore(to="neo4j", tenant=None, dry_run=False, fresh=False)
        while not result.ready():
            state = client.restore_state("neo4j") or {}
            if state.get("state") == "running":
                samples.append((time.monotonic(), int(state.get("done") or 0)))
                if len(samples) % 20 == 0:
                    _took(f"restoring: {samples[-1][1]} done", at)
            time.sleep(0.5)
        report = result.get(timeout=10)
        at = _took(f"restored {report['restored']}", at)

        # Then every memory is back, every constraint and index present, the rate level
        # (doc-0007 is back at the version the loss wrote, one chunk, synced to Qdrant meanwhile)
        assert report["restored"] + report["skipped_newer"] == DOCUMENTS * CHUNKS - CHUNKS + 1
        assert report["unreadable_count"] == 0 and report["keys"] >= 3
        graph = Neo4jStore(stack.settings)
        try:
            assert graph.missing_schema() == []
            assert set(schema_names()) >= {"memory_id", "document_id", "api_key_id", "memory_user_id"}
        finally:
            graph.close()
        assert _level(samples), samples

        # And the old keys work (a signed webhook too); the revoked one stays revoked
        assert httpx.get(f"{api}/api/status", headers={"X-API-Key": old.key}).status_code == 200
        assert httpx.get(f"{api}/api/status", headers={"X-API-Key": revoked.key}).status_code == 401
        body = b'{"id": "hook", "text": "A signed n8n post after the restore."}'
        stamp = str(int(time.time()))
        assert n8n.signing_secret is not None
        signed = {
            "content-type": "application/json",
            "x-engram-key-id": n8n.info.id,
            "x-engram-timestamp": stamp,
            "x-engram-signature": signature(n8n.signing_secret, stamp, body),
        }
        assert httpx.post(f"{api}/api/documents", content=body, headers=signed).status_code == 202

        # And the document written during the loss is at its newer version
        memories = stack.neo4j.execute_query(
            "MATCH (:Document {external_id: 'doc-0007', user_id: $t})-[:HAS_CHUNK]->(m) RETURN m.content AS c",
            t=TENANT,
        ).records
        assert [r["c"] for r in memories] == [newer["text"]]

        # And an unchanged re-ingest of a restored document does nothing
        texts = [f"document 3 passage {i} about topic {(3 * i) % 97}" for i in range(CHUNKS)]
        again = {"id": "doc-0003", "title": "doc-0003", "text": " ".join(texts)}
        assert _post(api, old.key, again).json()["unchanged"] == ["doc-0003"]

        # And one pass finds the primary in step and removes only the points of doc-0007's version
        # the loss replaced (the restore left them: superseded); the next finds no drift at all
        after = client.reconcile(timeout_s=600)
        assert after["primary_lost"] is None
        superseded = report["superseded_points"]
        assert after["drift_found"] == {
            "missing_in_qdrant": 0,
            "stale_in_qdrant": 0,
            "orphan_points": superseded,
        }
        assert after["drift_fixed"]["orphan_points"] == superseded
        second = client.reconcile(timeout_s=600)
        assert sum(second["drift_found"].values()) == 0, second["drift_found"]
    finally:
        app.terminate()
        app.wait(timeout=30)
        client.close()


def _level(samples: list[tuple[float, int]]) -> bool:
    """The rate over the last thousand memories is at least half that over the first thousand."""

    def rate(low: int, high: int) -> float:
        inside = [(t, d) for t, d in samples if low <= d <= high]
        if len(inside) < 2 or inside[-1][1] == inside[0][1]:
            return 0.0
        return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])

    total = DOCUMENTS * CHUNKS
    first, last = rate(0, 1500), rate(total - 1500, total)
    print(f"restore rate: first thousand {first:.0f}/s, last thousand {last:.0f}/s")
    return first > 0 and last >= 0.5 * first


def test_redis_and_neo4j_killed_come_back_by_themselves(stack: FaultStack) -> None:
    # Given the stack's Redis and Neo4j, each run by its keeper (ops/keep.py)
    run = stack.data_dir / "run"
    neo4j_pidfile = stack.data_dir / "neo4j" / "neo4j.pid"
    services: list[tuple[Path, Callable[[], bool]]] = [
        (run / "redis.pid", lambda: bool(stack.redis.ping())),
        (neo4j_pidfile, _neo4j_answers(stack)),
    ]
    for pidfile, probe in services:
        # When the service is killed with SIGKILL
        pid = int(pidfile.read_text().split()[0])
        os.kill(pid, 9)
        killed_at = time.monotonic()

        # Then a new process runs within seconds, and answers once it has started
        assert wait_for(_replaced(pidfile, pid), 10, 0.2), pidfile
        assert wait_for(probe, 120, 0.5)
        print(f"{pidfile.name}: back {time.monotonic() - killed_at:.1f} s after kill -9")


def _replaced(pidfile: Path, pid: int) -> Callable[[], bool]:
    return lambda: int(pidfile.read_text().split()[0]) != pid


def _neo4j_answers(stack: FaultStack) -> Callable[[], bool]:
    def probe() -> bool:
        stack.neo4j.verify_connectivity()
        return True

    return probe
