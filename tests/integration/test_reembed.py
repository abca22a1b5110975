"""A model change is a migration: ``engram reembed`` re-embeds everything into the new model's
vectors and collection, resumes after an interruption without redoing what is done, and
switches; searches never mix models. On the real Redis, Neo4j, embedded Qdrant and workers.

No second model can be downloaded here, so the "new" model is the same local ONNX model under
another ``ENGRAM_EMBEDDING_MODEL`` name: a different name is a different model, dimension or not.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import neo4j
import pytest
from fastapi.testclient import TestClient

from producers.client import EngramClient
from shared.settings import Settings
from shared.stores.base import MigrationState
from shared.stores.qdrant_payload import collection_name
from shared.stores.vectors import connect_vectors
from tests.integration.documents import FACTS, long_text, post_documents
from tests.integration.support import DIMENSION, MODEL, WORKERS, Workers, cypher, wait_until_finished

pytestmark = [pytest.mark.integration, pytest.mark.backup]

NEW_MODEL = "minilm-renamed"


def all_points(workers: Workers, settings: Settings, env: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Every point of every collection that holds some, by collection, read while the write worker
    is paused (through the adapter of the engine the settings name)."""
    workers.stop("write")
    connection = connect_vectors(settings)
    try:
        found: dict[str, dict[str, Any]] = {}
        for model, dimension in connection.models():
            store = connection.store(model, dimension)
            ids: list[str] = []
            after: str | None = None
            while True:
                rows, after = store.scroll_payloads(after, 1000, ["id"])
                ids.extend(point_id for point_id, _ in rows)
                if after is None:
                    break
            found[store.collection] = {p.id: dict(p.payload) for p in store.retrieve(ids)}
    finally:
        connection.close()
        workers.start("write", **env)
    return found


def memory_versions(driver: neo4j.Driver) -> dict[str, int]:
    rows = cypher(driver, "MATCH (m:Memory) RETURN m.id AS id, m.version AS version")
    return {row["id"]: row["version"] for row in rows}


def restart_all(workers: Workers, **env: str) -> None:
    for name in WORKERS:
        workers.restart(name, **env)


def wait_for(check: Any, timeout_s: float = 60, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def search(api: TestClient, tenant: str) -> Any:
    return api.post(
        "/api/memory/semantic-search",
        json={"query": "How do green leaves make food out of light?", "user_id": tenant, "top_k": 3},
    )


def test_a_model_change_is_re_embedded_resumed_and_switched_without_mixing_models(
    api: TestClient, neo4j_driver: neo4j.Driver, workers: Workers, settings: Settings, tenant: str
) -> None:
    # Given documents ingested with the default model
    docs: list[dict[str, object]] = [{"user_id": tenant, "id": k, "text": t} for k, t in FACTS.items()]
    docs.append({"user_id": tenant, "id": "long", "text": long_text(120)})
    post_documents(api, docs)
    wait_until_finished(api, tenant, [str(d["id"]) for d in docs])
    versions = memory_versions(neo4j_driver)
    total = len(versions)
    assert total >= 12
    old_name = collection_name(settings.qdrant_collection_prefix, MODEL, DIMENSION)
    new_name = collection_name(settings.qdrant_collection_prefix, NEW_MODEL, DIMENSION)
    old_points = all_points(workers, settings, {})[old_name]

    new_settings = settings.model_copy(
        update={"embedding_model": NEW_MODEL, "embedding_dimension": DIMENSION}
    )
    client = EngramClient(new_settings)
    try:
        # When the re-embedding starts, a memory a page, and the write worker stops mid-way
        first, pages = client.reembed_start(page_size=1)
        assert (first.phase, first.run, pages) == ("running", 1, total)

        def some_done() -> bool:
            progress = client.reembed_progress()
            return progress is not None and progress.done >= 3

        wait_for(some_done, what="the first pages")
        workers.stop("write")
        interrupted = client.reembed_progress()
        assert interrupted is not None
        assert 3 <= interrupted.done < total, "the write worker finished before it was stopped"

        # Then searches still answer with the old model meanwhile
        assert search(api, tenant).status_code == 200

        # When engram reembed runs again (enqueueing while the write worker is down), then the
        # write worker comes back
        finished: list[MigrationState] = []
        errors: list[BaseException] = []

        def resume() -> None:
            other = EngramClient(new_settings)
            try:
                finished.append(other.reembed(lambda _: None, timeout_s=300, page_size=1))
            except BaseException as exc:
                errors.append(exc)
            finally:
                other.close()

        thread = threading.Thread(target=resume)
        thread.start()

        def second_run() -> bool:
            progress = client.reembed_progress()
            return progress is not None and progress.migration.run == 2

        wait_for(second_run, what="the second run")
        time.sleep(2)  # its pages are sent
        workers.start("write")
        thread.join(timeout=300)
        assert not errors, errors
        done = finished[0]

        # Then it switched, re-embedding only what the first run had not: each memory once
        assert done.phase == "done" and done.run == 2
        assert done.run_reembedded == done.run_pages == total - interrupted.done
        assert done.reembedded == total
    finally:
        client.close()

    # And every memory now carries the new model, with no next vector left behind
    rows = cypher(
        neo4j_driver,
        "MATCH (m:Memory) RETURN m.embedding_model AS model, m.vector_sync AS sync, "
        "m.embedding_next IS NULL AS clean, size(m.embedding) AS dim",
    )
    assert {(r["model"], r["sync"], r["clean"], r["dim"]) for r in rows} == {
        (NEW_MODEL, "synced", True, DIMENSION)
    }
    claim = cypher(neo4j_driver, "MATCH (s:EngramSchema {id: 'embedding'}) RETURN s.embedding_model AS m")
    assert claim[0]["m"] == NEW_MODEL

    # And a query worker still on the old model refuses to search (503), never mixing models
    refused = search(api, tenant)
    assert refused.status_code == 503, refused.text
    assert f"restart the query worker with model {NEW_MODEL}" in refused.json()["detail"]

    # When every worker is restarted with the new model
    env = {"ENGRAM_EMBEDDING_MODEL": NEW_MODEL}
    restart_all(workers, **env)

    # Then searches find the right memory again
    found = search(api, tenant)
    assert found.status_code == 200, found.text
    assert found.json()["results"][0]["document_id"] == "photosynthesis"

    # And the new collection holds every memory at its version, with the new model; the old one
    # is untouched
    collections = all_points(workers, settings, env)
    new_points = collections[new_name]
    assert {k: p["version"] for k, p in new_points.items()} == versions
    assert {p["embedding_model"] for p in new_points.values()} == {NEW_MODEL}
    assert collections[old_name] == old_points

    # And a reconcile pass finds no drift and leaves the old collection alone
    client = EngramClient(new_settings)
    try:
        report = client.reconcile(timeout_s=120)
        assert report["error"] is None
        assert report["drift_found"] == {"missing_in_qdrant": 0, "stale_in_qdrant": 0, "orphan_points": 0}
        assert all_points(workers, settings, env)[old_name] == old_points

        # And ingestion goes on with the new model
        post_documents(
            api, [{"user_id": tenant, "id": "new", "text": "Bees dance to show where flowers are."}]
        )
        status = wait_until_finished(api, tenant, ["new"])["new"]
        assert status["state"] == "done" and status["vector_sync"]["synced"] == 1

        # When the old collection is dropped
        assert client.reembed_drop_old() == (MODEL, DIMENSION)
    finally:
        client.close()

    # Then it is gone, and the new one stays
    collections = all_points(workers, settings, env)
    assert old_name not in collections and len(collections[new_name]) == total + 1

    # Finally, back to the default model (a second migration) for the tests that follow
    back = EngramClient(settings)
    try:
        state = back.reembed(lambda _: None, timeout_s=300)
        assert state.phase == "done" and state.target.model == MODEL
    finally:
        back.close()
    restart_all(workers)
    assert search(api, tenant).json()["results"][0]["document_id"] == "photosynthesis"
