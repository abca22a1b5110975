"""Helpers of the integration tests: worker processes, Cypher, waiting, reading Qdrant."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import neo4j
import redis
from fastapi.testclient import TestClient

from shared.auth import NewKey, signature
from shared.settings import Settings
from shared.stores.base import SearchableVectorStore, VectorPoint, VectorStore
from shared.stores.neo4j import Neo4jStore
from shared.stores.neo4j.search_queries import FULLTEXT_INDEX
from shared.stores.vectors import connect_vectors

ROOT = Path(__file__).resolve().parents[2]
CELERY = str(Path(sys.executable).with_name("celery"))
# name: (queues, pool, concurrency), as ops runs them. The write worker owns the embedded Qdrant
# folder, so it also serves the fallback searches; threads let one answer while a batch is written.
WORKERS = {
    "ingest": ("ingest", "prefork", 1),
    "embed": ("embed", "prefork", 1),
    "write": ("write,reconcile,fallback", "threads", 3),
    "query": ("query", "prefork", 1),
}
MODEL, DIMENSION = "all-MiniLM-L6-v2", 384
# The app answers only hosts of ENGRAM_ALLOWED_HOSTS (not TestClient's "testserver").
APP_URL = "http://localhost"
# Makes an API key: for a tenant, or an admin key (None); with a signing secret if asked.
KeyMaker = Callable[..., NewKey]


class Workers:
    """The Celery worker processes of the test session."""

    def __init__(self, settings: Settings) -> None:
        self._logs = settings.data_dir / "logs"
        self._logs.mkdir(parents=True, exist_ok=True)
        self._processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, **env: str) -> None:
        if name in self._processes and self._processes[name].poll() is None:
            return
        queues, pool, concurrency = WORKERS[name]
        log = self._logs / f"test-worker-{name}.log"
        log.write_bytes(b"")
        command = [
            CELERY,
            "-A",
            "workers.app",
            "worker",
            "-Q",
            queues,
            "-n",
            f"{name}-{uuid.uuid4().hex[:6]}@%h",
        ]
        command += ["--pool", pool, "--concurrency", str(concurrency), "--loglevel", "INFO"]
        with log.open("ab") as out:
            self._processes[name] = subprocess.Popen(
                command, cwd=ROOT, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 90
        while b" ready." not in log.read_bytes():
            if self._processes[name].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker {name} did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)

    def stop(self, name: str) -> None:
        process = self._processes.pop(name, None)
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def kill(self, name: str) -> None:
        """SIGKILLs the worker's main process (a threads pool has no other), as a crash would."""
        process = self._processes.pop(name, None)
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def restart(self, name: str, **env: str) -> None:
        self.stop(name)
        self.start(name, **env)

    def revive(self) -> list[str]:
        """Starts again every worker that has exited (as supervisord does); returns their names.

        A Celery worker exits when Redis refuses the acknowledgement of a message (kombu treats
        it as unrecoverable, and the message goes back to its queue): tests that fill Redis are
        this worker's supervisor."""
        dead = [name for name, process in self._processes.items() if process.poll() is not None]
        for name in dead:
            self._processes.pop(name)
            self.start(name)
        return dead

    def stop_all(self) -> None:
        for name in list(self._processes):
            self.stop(name)

    def running(self) -> list[str]:
        return [name for name, process in self._processes.items() if process.poll() is None]


def cypher(driver: neo4j.Driver, query: str, **params: Any) -> list[dict[str, Any]]:
    records, _, _ = driver.execute_query(query, params)  # type: ignore[arg-type]
    return [record.data() for record in records]


def bootstrap_over_earlier_fulltext_index(settings: Settings, driver: neo4j.Driver, earlier: str) -> None:
    """A store whose fulltext index is an earlier version's (``earlier`` makes it, in place of
    this version's), whose schema a process of this version then makes."""
    cypher(driver, f"DROP INDEX {FULLTEXT_INDEX} IF EXISTS")
    cypher(driver, earlier)
    store = Neo4jStore(settings)
    try:
        store.bootstrap(MODEL, DIMENSION)
    finally:
        store.close()


def wait_until_finished(
    api: TestClient, user_id: str, document_ids: list[str], timeout_s: float = 180
) -> dict[str, Any]:
    """Polls the status endpoint until every document is done, failed or unchanged (stored as
    posted, so not ingested again); returns the statuses."""
    deadline = time.monotonic() + timeout_s
    statuses: dict[str, Any] = {}
    while time.monotonic() < deadline:
        for document_id in document_ids:
            response = api.get(f"/api/documents/{document_id}", params={"user_id": user_id})
            if response.status_code == 200:
                statuses[document_id] = response.json()
        if len(statuses) == len(document_ids) and all(
            s["state"] in ("done", "failed", "unchanged") for s in statuses.values()
        ):
            return statuses
        time.sleep(0.3)
    raise AssertionError(f"documents not finished in {timeout_s} s: {statuses}")


@contextmanager
def qdrant_reader(workers: Workers, settings: Settings) -> Iterator[SearchableVectorStore]:
    """Pauses the worker that owns the embedded Qdrant folder and opens it, through the adapter of
    the engine the settings name (``ENGRAM_QDRANT_ENGINE``: local mode or Edge)."""
    workers.stop("write")
    connection = connect_vectors(settings)
    try:
        yield connection.store(MODEL, DIMENSION)
    finally:
        connection.close()
        workers.start("write")


ANY_VERSION = 2**62
"""A delete at this version takes a point whatever version it holds (drift made by hand)."""


def tenant_points(store: VectorStore, user_id: str) -> dict[str, VectorPoint]:
    """Every point of one tenant, with its vector and whole payload."""
    ids: list[str] = []
    after: str | None = None
    while True:
        rows, after = store.scroll_payloads(after, 1000, ["user_id"], user_id)
        ids.extend(point_id for point_id, _ in rows)
        if after is None:
            return {p.id: p for p in store.retrieve(ids)}


def forget_failed_tries(client: redis.Redis) -> None:
    """Forgets every failed key check counted (shared/failed_tries.py), as a new client address would
    start: tests share one address, and one test's refused keys must not make another's a 429."""
    found = list(client.scan_iter(match="engram:auth:failed:*", count=1000))
    if found:
        client.delete(*found)


def signed_headers(key_id: str, secret: str, body: bytes) -> dict[str, str]:
    """A signed webhook's headers for ``body``, signed now with ``secret`` in ``key_id``'s name."""
    now = str(int(time.time()))
    return {
        "content-type": "application/json",
        "x-engram-key-id": key_id,
        "x-engram-timestamp": now,
        "x-engram-signature": signature(secret, now, body),
    }
