"""The whole pipeline on real services: HTTP app → queues → chunk → embed → Neo4j + Qdrant → search."""

from __future__ import annotations

import neo4j
import pytest
from fastapi.testclient import TestClient

from shared.settings import Settings
from shared.stores.neo4j.search_queries import FULLTEXT_INDEX
from tests.integration.documents import FACTS, long_text, post_documents, tenant_counts
from tests.integration.support import (
    MODEL,
    Workers,
    cypher,
    qdrant_reader,
    tenant_points,
    wait_until_finished,
)

pytestmark = [pytest.mark.integration, pytest.mark.backup]


def test_ingest_lands_in_both_stores_with_relations_indexes_and_sync(
    api: TestClient, neo4j_driver: neo4j.Driver, workers: Workers, settings: Settings, tenant: str
) -> None:
    # Given a long document and a short one, posted through the webhook
    ids = post_documents(
        api,
        [
            {"user_id": tenant, "id": "long", "text": long_text(), "title": "Field notes", "tags": ["birds"]},
            {"user_id": tenant, "id": "short", "text": FACTS["tides"], "project_id": "sea"},
        ],
    )
    assert ids == ["long", "short"]

    # When the pipeline has finished them
    statuses = wait_until_finished(api, tenant, ids)

    # Then every chunk is a Memory, all synced, chained in document order
    assert statuses["long"]["state"] == "done"
    assert statuses["long"]["chunks"] >= 3
    assert statuses["long"]["vector_sync"] == {
        "pending": 0,
        "synced": statuses["long"]["chunks"],
        "failed": 0,
    }
    memories = cypher(
        neo4j_driver,
        """
        MATCH (d:Document {user_id: $u, external_id: 'long'})-[:HAS_CHUNK]->(m:Memory)
        RETURN m.id AS id, m.chunk_index AS idx, m.token_count AS tokens, size(m.embedding) AS dim,
               m.embedding_model AS model, m.vector_sync AS sync, m.content_hash AS hash,
               m.tags AS tags, m.title AS title
        ORDER BY idx
        """,
        u=tenant,
    )
    assert [m["idx"] for m in memories] == list(range(len(memories)))
    assert all(m["dim"] == 384 and m["model"] == MODEL and m["sync"] == "synced" for m in memories)
    assert all(m["tokens"] <= settings.chunk_size_tokens for m in memories)
    assert all(m["tags"] == ["birds"] and m["title"] == "Field notes" for m in memories)
    chain = cypher(
        neo4j_driver,
        "MATCH (a:Memory {user_id: $u, document_id: 'long'})-[:NEXT]->(b:Memory) RETURN a.chunk_index AS a, b.chunk_index AS b ORDER BY a",
        u=tenant,
    )
    assert [(c["a"], c["b"]) for c in chain] == [(i, i + 1) for i in range(len(memories) - 1)]
    counts = tenant_counts(neo4j_driver, tenant)
    assert counts["memories"] == counts["has_chunk"] == len(memories) + 1

    # And both indexes exist, are online, and find the memories
    indexes = {
        row["type"]: row["state"]
        for row in cypher(
            neo4j_driver,
            "SHOW INDEXES YIELD name, type, state WHERE name IN ['memory_embedding', $fulltext] RETURN type, state",
            fulltext=FULLTEXT_INDEX,
        )
    }
    assert indexes == {"VECTOR": "ONLINE", "FULLTEXT": "ONLINE"}
    hits = cypher(
        neo4j_driver,
        "CALL db.index.fulltext.queryNodes($fulltext, 'badger') YIELD node WHERE node.user_id = $u RETURN count(node) AS n",
        fulltext=FULLTEXT_INDEX,
        u=tenant,
    )
    assert hits[0]["n"] >= 1

    # And Qdrant holds the same ids, with the Memory's fields as payload and the same vector
    by_id = {m["id"]: m for m in memories}
    stored = {
        row["id"]: row["embedding"]
        for row in cypher(
            neo4j_driver,
            "MATCH (m:Memory {user_id: $u}) RETURN m.id AS id, m.embedding AS embedding",
            u=tenant,
        )
    }
    with qdrant_reader(workers, settings) as store:
        points = store.retrieve(list(stored))
    assert {p.id for p in points} == set(stored)
    for point in points:
        payload = point.payload
        assert payload["user_id"] == tenant
        assert "embedding" not in payload and "vector_sync" not in payload
        if str(point.id) in by_id:
            memory = by_id[str(point.id)]
            assert payload["content_hash"] == memory["hash"]
            assert payload["chunk_index"] == memory["idx"]
            assert payload["embedding_model"] == MODEL
        assert point.vector == pytest.approx(stored[str(point.id)], abs=1e-5)


def test_paraphrased_query_finds_the_right_memory_and_other_tenants_see_nothing(
    api: TestClient, tenant: str
) -> None:
    # Given a handful of facts for one tenant
    ids = post_documents(api, [{"user_id": tenant, "id": key, "text": text} for key, text in FACTS.items()])
    wait_until_finished(api, tenant, ids)

    # When that tenant asks in other words
    response = api.post(
        "/api/memory/semantic-search",
        json={"query": "How do green leaves make food out of light?", "user_id": tenant, "top_k": 3},
    )

    # Then the photosynthesis memory comes first, with scores and timings
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["count"] == len(body["results"]) == 3
    assert body["results"][0]["document_id"] == "photosynthesis"
    assert body["results"][0]["similarity_score"] > body["results"][1]["similarity_score"]
    assert body["embedding_time_ms"] >= 0 and body["search_time_ms"] > 0
    assert body["source"] == "neo4j"

    # And another tenant asking the same finds nothing of the first
    other = api.post(
        "/api/memory/semantic-search",
        json={
            "query": "How do green leaves make food out of light?",
            "user_id": tenant + "-other",
            "top_k": 3,
        },
    )
    assert other.status_code == 200
    assert other.json()["results"] == []


def test_ingesting_the_same_documents_twice_changes_no_counts(
    api: TestClient, neo4j_driver: neo4j.Driver, workers: Workers, settings: Settings, tenant: str
) -> None:
    documents = [
        {"user_id": tenant, "id": "long", "text": long_text()},
        {"user_id": tenant, "id": "short", "text": FACTS["borrow"]},
    ]
    wait_until_finished(api, tenant, post_documents(api, documents))
    first = tenant_counts(neo4j_driver, tenant)

    wait_until_finished(api, tenant, post_documents(api, documents))
    second = tenant_counts(neo4j_driver, tenant)

    assert first == second
    assert first["documents"] == 2 and first["memories"] > 2
    ids = [
        r["id"] for r in cypher(neo4j_driver, "MATCH (m:Memory {user_id: $u}) RETURN m.id AS id", u=tenant)
    ]
    with qdrant_reader(workers, settings) as store:
        points = len(tenant_points(store, tenant))
    assert points == len(ids) == first["memories"]


def test_reingesting_a_changed_document_replaces_its_chunks_in_both_stores(
    api: TestClient, neo4j_driver: neo4j.Driver, workers: Workers, settings: Settings, tenant: str
) -> None:
    # Given a document of several chunks
    wait_until_finished(
        api, tenant, post_documents(api, [{"user_id": tenant, "id": "doc", "text": long_text(60)}])
    )
    before = {
        r["id"] for r in cypher(neo4j_driver, "MATCH (m:Memory {user_id: $u}) RETURN m.id AS id", u=tenant)
    }
    assert len(before) >= 3

    # When it comes back shorter and different
    status = wait_until_finished(
        api, tenant, post_documents(api, [{"user_id": tenant, "id": "doc", "text": FACTS["sourdough"]}])
    )["doc"]

    # Then only the new chunk remains, in Neo4j and in Qdrant, and no tombstone is left behind
    after = cypher(
        neo4j_driver, "MATCH (m:Memory {user_id: $u}) RETURN m.id AS id, m.content AS content", u=tenant
    )
    assert status["chunks"] == 1 and len(after) == 1
    assert after[0]["content"] == FACTS["sourdough"]
    tombstones = cypher(neo4j_driver, "MATCH (t:DeletedMemory {user_id: $u}) RETURN count(t) AS n", u=tenant)
    assert tombstones[0]["n"] == 0
    with qdrant_reader(workers, settings) as store:
        remaining = store.retrieve(list(before))
    assert [p.id for p in remaining] == [after[0]["id"]]
    assert remaining[0].payload["content"] == FACTS["sourdough"]


def test_qdrant_unreachable_lands_in_neo4j_as_failed_and_reconcile_repairs_it(
    api: TestClient, neo4j_driver: neo4j.Driver, workers: Workers, settings: Settings, tenant: str
) -> None:
    from producers.client import EngramClient

    # Given the write worker cannot reach Qdrant (nothing listens on the discard port)
    workers.restart("write", ENGRAM_QDRANT_URL="http://127.0.0.1:9", ENGRAM_QDRANT_TIMEOUT_S="2")
    try:
        ids = post_documents(
            api, [{"user_id": tenant, "id": key, "text": text} for key, text in FACTS.items()]
        )
        statuses = wait_until_finished(api, tenant, ids)
    finally:
        workers.restart("write")

    # Then the Neo4j write landed anyway, every Memory recorded failed with the error and one attempt
    assert all(s["state"] == "done" and s["vector_sync"]["failed"] == 1 for s in statuses.values())
    rows = cypher(
        neo4j_driver,
        "MATCH (m:Memory {user_id: $u}) RETURN m.id AS id, m.vector_sync AS sync, m.vector_sync_error AS error, m.vector_sync_attempts AS attempts",
        u=tenant,
    )
    assert len(rows) == len(FACTS)
    assert all(r["sync"] == "failed" and "qdrant" in r["error"] and r["attempts"] == 1 for r in rows)

    # When the reconciler runs with Qdrant back
    client = EngramClient(settings)
    try:
        report = client.reconcile(timeout_s=120)
    finally:
        client.close()

    # Then every Memory is synced and its point is in Qdrant
    assert report["error"] is None and report["resynced"] >= len(FACTS)
    synced = cypher(
        neo4j_driver,
        "MATCH (m:Memory {user_id: $u}) RETURN collect(DISTINCT m.vector_sync) AS states",
        u=tenant,
    )
    assert synced[0]["states"] == ["synced"]
    with qdrant_reader(workers, settings) as store:
        points = store.retrieve([r["id"] for r in rows])
    assert len(points) == len(FACTS)
