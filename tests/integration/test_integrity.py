"""Both stores always agree: versioned writes, deletes, drift repaired both ways, bad documents
failing alone — on the real Redis, Neo4j, embedded Qdrant and Celery workers."""

from __future__ import annotations

import time
from typing import Any

import neo4j
import pytest
import redis
from fastapi.testclient import TestClient

from producers.client import EngramClient
from shared.models import DocumentIn
from shared.settings import Settings
from tests.integration.documents import FACTS, long_text, post_documents
from tests.integration.parity import assert_parity, memories
from tests.integration.support import (
    ANY_VERSION,
    Workers,
    cypher,
    qdrant_reader,
    wait_until_finished,
)
from workers.app import CHUNK_TASK
from workers.app import app as celery_app

pytestmark = [pytest.mark.integration, pytest.mark.backup]


def wait_for_batch(redis_client: redis.Redis, batch_id: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not redis_client.exists(f"engram:batch:{batch_id}:written"):
        assert time.monotonic() < deadline, f"batch {batch_id} not written in {timeout_s} s"
        time.sleep(0.3)


def test_version_1_retried_after_version_2_landed_changes_nothing(
    api: TestClient,
    neo4j_driver: neo4j.Driver,
    redis_client: redis.Redis,
    workers: Workers,
    settings: Settings,
    tenant: str,
) -> None:
    # Given version 1 of a long document, then version 2 (shorter, other words), both done
    v1 = {"user_id": tenant, "id": "doc", "text": long_text(60)}
    first = api.post("/api/documents", json=v1).json()
    wait_until_finished(api, tenant, ["doc"])
    second = api.put("/api/documents/doc", json={"user_id": tenant, "text": FACTS["tides"]})
    assert second.status_code == 202, second.text
    assert second.json()["version"] > first["version"]
    wait_until_finished(api, tenant, ["doc"])

    # When version 1's ingest message is delivered again, late
    late = celery_app.send_task(CHUNK_TASK, args=([{**v1, "version": first["version"]}],))
    wait_for_batch(redis_client, late.id)

    # Then both stores hold version 2's one chunk, synced, and nothing of version 1
    stored = assert_parity(neo4j_driver, workers, settings, tenant)
    assert len(stored) == 1
    assert {row["version"] for row in stored.values()} == {second.json()["version"]}
    status = api.get("/api/documents/doc", params={"user_id": tenant}).json()
    assert status["state"] == "done" and status["version"] == second.json()["version"]


def test_the_same_batch_delivered_twice_duplicates_nothing(
    api: TestClient,
    neo4j_driver: neo4j.Driver,
    redis_client: redis.Redis,
    workers: Workers,
    settings: Settings,
    tenant: str,
) -> None:
    # Given one ingest message sent twice
    payload = [{"user_id": tenant, "id": key, "text": text, "version": 7} for key, text in FACTS.items()]
    sent = [celery_app.send_task(CHUNK_TASK, args=(payload,)) for _ in range(2)]
    for task in sent:
        wait_for_batch(redis_client, task.id)

    # Then each fact is one memory in each store
    stored = assert_parity(neo4j_driver, workers, settings, tenant)
    assert len(stored) == len(FACTS)
    documents = cypher(neo4j_driver, "MATCH (d:Document {user_id: $u}) RETURN count(d) AS n", u=tenant)
    assert documents[0]["n"] == len(FACTS)


def test_delete_is_gone_from_search_and_both_stores_and_a_late_write_does_not_bring_it_back(
    api: TestClient,
    neo4j_driver: neo4j.Driver,
    redis_client: redis.Redis,
    workers: Workers,
    settings: Settings,
    tenant: str,
) -> None:
    # Given two documents
    accepted = api.post(
        "/api/documents",
        json=[
            {"user_id": tenant, "id": "keep", "text": FACTS["borrow"]},
            {"user_id": tenant, "id": "drop", "text": long_text(30)},
        ],
    ).json()
    wait_until_finished(api, tenant, ["keep", "drop"])

    # When one is deleted
    response = api.delete("/api/documents/drop", params={"user_id": tenant})

    # Then it is gone at once from search, from Neo4j and from Qdrant (confirmed), the other stays
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["memories"] >= 2 and body["documents"] == 1 and body["qdrant_confirmed"] is True
    search = api.post(
        "/api/memory/semantic-search", json={"query": "badger seen near the salt marsh", "user_id": tenant}
    ).json()
    assert [r["document_id"] for r in search["results"]] == ["keep"]
    stored = assert_parity(neo4j_driver, workers, settings, tenant)
    assert len(stored) == 1
    assert api.get("/api/documents/drop", params={"user_id": tenant}).json()["state"] == "deleted"
    assert api.delete("/api/documents/drop", params={"user_id": tenant}).status_code == 404

    # And the ingestion accepted before the delete, delivered after it, is a no-op
    late = celery_app.send_task(
        CHUNK_TASK,
        args=([{"user_id": tenant, "id": "drop", "text": long_text(30), "version": accepted["version"]}],),
    )
    wait_for_batch(redis_client, late.id)
    assert len(assert_parity(neo4j_driver, workers, settings, tenant)) == 1
    tombstones = cypher(neo4j_driver, "MATCH (t:DeletedMemory {user_id: $u}) RETURN count(t) AS n", u=tenant)
    assert tombstones[0]["n"] == 0


def test_memories_are_listed_read_and_deleted_within_their_tenant_only(
    api: TestClient, neo4j_driver: neo4j.Driver, workers: Workers, settings: Settings, tenant: str
) -> None:
    # Given facts for two tenants, some in a session
    other = tenant + "-other"
    for user in (tenant, other):
        docs = [
            {"user_id": user, "id": key, "text": text, "session_id": "s1" if i % 2 else "s2"}
            for i, (key, text) in enumerate(FACTS.items())
        ]
        post_documents(api, docs)
        wait_until_finished(api, user, list(FACTS))

    # When the first tenant lists its memories two at a time
    seen: list[str] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"user_id": tenant, "limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = api.get("/api/memories", params=params).json()
        seen += [m["id"] for m in page["memories"]]
        assert all(m["user_id"] == tenant for m in page["memories"])
        cursor = page["next_cursor"]
        if cursor is None:
            break

    # Then it sees each of its memories once, and can read one
    assert len(seen) == len(set(seen)) == len(FACTS)
    one = api.get(f"/api/memories/{seen[0]}", params={"user_id": tenant})
    assert one.status_code == 200 and one.json()["vector_sync"] == "synced"
    assert api.get(f"/api/memories/{seen[0]}", params={"user_id": other}).status_code == 404

    # When it deletes its session s1, and tries to delete with no filter
    refused = api.post("/api/memories/delete", json={"user_id": tenant})
    deleted = api.post("/api/memories/delete", json={"user_id": tenant, "filters": {"session_id": "s1"}})

    # Then nothing is deleted without a filter, and only its own s1 memories go, from both stores
    assert refused.status_code == 422
    assert deleted.status_code == 200 and deleted.json()["memories"] == 2
    assert deleted.json()["qdrant_confirmed"] is True
    assert len(assert_parity(neo4j_driver, workers, settings, tenant)) == len(FACTS) - 2
    assert len(assert_parity(neo4j_driver, workers, settings, other)) == len(FACTS)


def test_drift_made_by_hand_in_each_store_is_found_by_a_dry_run_and_repaired_by_one_pass(
    api: TestClient, neo4j_driver: neo4j.Driver, workers: Workers, settings: Settings, tenant: str
) -> None:
    # Given five synced memories, two of whose points are deleted from Qdrant by hand, and two
    # others deleted from Neo4j by hand (their points are now orphans)
    post_documents(api, [{"user_id": tenant, "id": key, "text": text} for key, text in FACTS.items()])
    wait_until_finished(api, tenant, list(FACTS))
    ids = sorted(memories(neo4j_driver, tenant))
    with qdrant_reader(workers, settings) as store:
        store.delete({point_id: ANY_VERSION for point_id in ids[:2]})
    cypher(neo4j_driver, "MATCH (m:Memory) WHERE m.id IN $ids DETACH DELETE m", ids=ids[2:4])

    client = EngramClient(settings)
    try:
        # When a dry run looks, then one pass repairs
        dry = client.reconcile(dry_run=True, timeout_s=120)
        real = client.reconcile(timeout_s=120)
        after = client.reconcile(dry_run=True, timeout_s=120)
    finally:
        client.close()

    # Then the dry run saw both kinds and changed nothing, the pass fixed them, none is left
    assert dry["drift_found"]["missing_in_qdrant"] >= 2 and dry["drift_found"]["orphan_points"] >= 2
    assert dry["drift_fixed"] == {"missing_in_qdrant": 0, "stale_in_qdrant": 0, "orphan_points": 0}
    assert real["error"] is None
    assert real["drift_fixed"]["missing_in_qdrant"] >= 2 and real["drift_fixed"]["orphan_points"] >= 2
    assert after["drift_found"] == {"missing_in_qdrant": 0, "stale_in_qdrant": 0, "orphan_points": 0}
    stored = assert_parity(neo4j_driver, workers, settings, tenant)
    assert set(stored) == {ids[0], ids[1], ids[4]}


def test_a_document_the_model_cannot_read_fails_alone(
    api: TestClient, settings: Settings, tenant: str
) -> None:
    good = {"user_id": tenant, "id": "good", "text": FACTS["eiffel"]}
    bad = {"user_id": tenant, "id": "bad", "text": "\ufffd\ufffd\ufffd"}

    # The HTTP edge refuses the batch whole, naming the document; nothing is enqueued
    refused = api.post("/api/documents", json=[good, bad])
    assert refused.status_code == 422 and "nothing to read" in refused.text
    assert api.get("/api/documents/good", params={"user_id": tenant}).status_code == 404

    # Given the same batch queued without that check (by an older producer, say)
    client = EngramClient(settings)
    try:
        client.ingest([DocumentIn(**good), DocumentIn.model_construct(**bad)])
    finally:
        client.close()

    # Then the good one is done and the bad one failed alone, saying why
    statuses = wait_until_finished(api, tenant, ["good", "bad"])
    assert statuses["good"]["state"] == "done" and statuses["good"]["vector_sync"]["synced"] == 1
    assert statuses["bad"]["state"] == "failed"
    assert "nothing to read" in statuses["bad"]["error"]


def test_a_document_that_failed_for_good_is_replayed_from_staging(
    api: TestClient, neo4j_driver: neo4j.Driver, workers: Workers, settings: Settings, tenant: str
) -> None:
    # Given a write worker that cannot reach Neo4j and has no retry budget: the write fails for good
    workers.restart("write", ENGRAM_NEO4J_URI="bolt://127.0.0.1:9", ENGRAM_TASK_RETRY_BUDGET_S="0")
    try:
        post_documents(api, [{"user_id": tenant, "id": key, "text": text} for key, text in FACTS.items()])
        statuses = wait_until_finished(api, tenant, list(FACTS))
    finally:
        workers.restart("write")
    assert all(s["state"] == "failed" and "neo4j" in s["error"] for s in statuses.values())

    # When the failed documents are replayed, with Neo4j reachable again
    client = EngramClient(settings)
    try:
        report = client.replay(tenant, list(FACTS))
    finally:
        client.close()

    # Then they are re-driven from the staged vectors, and land in both stores
    assert report.write == len(FACTS) and report.not_staged == []
    statuses = wait_until_finished(api, tenant, list(FACTS))
    assert all(s["state"] == "done" and s["vector_sync"]["synced"] == 1 for s in statuses.values())
    assert len(assert_parity(neo4j_driver, workers, settings, tenant)) == len(FACTS)


def test_a_document_neo4j_refuses_fails_alone_with_neo4js_reason(
    api: TestClient, neo4j_driver: neo4j.Driver, tenant: str
) -> None:
    # Given a rule in Neo4j the edge knows nothing of: no two Documents share a title
    title = f"only once {tenant}"
    cypher(
        neo4j_driver,
        "CREATE CONSTRAINT test_title_once IF NOT EXISTS FOR (d:Document) REQUIRE d.title IS UNIQUE",
    )
    try:
        # When one batch holds two documents of that title, and a third of another
        response = api.post(
            "/api/documents",
            json=[
                {"user_id": tenant, "id": "first", "title": title, "text": FACTS["eiffel"]},
                {"user_id": tenant, "id": "second", "title": title, "text": FACTS["borrow"]},
                {"user_id": tenant, "id": "third", "title": f"other {tenant}", "text": FACTS["tides"]},
            ],
        )
        assert response.status_code == 202, response.text
        statuses = wait_until_finished(api, tenant, ["first", "second", "third"])
    finally:
        cypher(neo4j_driver, "DROP CONSTRAINT test_title_once IF EXISTS")

    # Then Neo4j's refusal fails one of the pair, saying why, and never holds the batch up
    states = sorted(s["state"] for s in statuses.values())
    assert states == ["done", "done", "failed"], statuses
    failed = next(s for s in statuses.values() if s["state"] == "failed")
    assert failed["document_id"] in ("first", "second")
    assert "Neo4j refused" in failed["error"] and "ConstraintValidationFailed" in failed["error"]
    assert statuses["third"]["state"] == "done" and statuses["third"]["vector_sync"]["synced"] == 1
