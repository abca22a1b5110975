"""engram restore on real services: a tenant's memories lost from Neo4j come back from Qdrant,
through the store's own write path (Documents, HAS_CHUNK, NEXT), synced, as they were."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import neo4j
import pytest
from fastapi.testclient import TestClient

from producers.cli import main as cli_main
from producers.client import EngramClient
from shared.settings import Settings
from tests.integration.documents import FACTS, long_text, post_documents, tenant_counts
from tests.integration.support import (
    KeyMaker,
    Workers,
    cypher,
    qdrant_reader,
    tenant_points,
    wait_until_finished,
)

pytestmark = [pytest.mark.integration, pytest.mark.backup]

MEMORIES = """
MATCH (d:Document {user_id: $u})-[:HAS_CHUNK]->(m:Memory)
OPTIONAL MATCH (m)-[:NEXT]->(n:Memory)
RETURN m.id AS id, m.content AS content, m.version AS version, m.content_hash AS hash,
       m.chunk_index AS chunk, m.document_id AS document_id, m.title AS title, m.tags AS tags,
       m.created_at AS created_at, m.embedding_model AS model, m.embedding AS embedding,
       m.vector_sync AS sync, d.id AS key, d.title AS doc_title, d.source AS source, d.uri AS uri,
       d.metadata AS metadata, d.content_hash AS doc_hash, d.created_at AS doc_created,
       n.id AS next
ORDER BY id
"""


def _memories(driver: neo4j.Driver, tenant: str) -> list[dict[str, Any]]:
    return cypher(driver, MEMORIES, u=tenant)


def _restore(settings: Settings, **options: Any) -> dict[str, Any]:
    client = EngramClient(settings)
    try:
        report: dict[str, Any] = client.start_restore(**options).get(timeout=180)
        return report
    finally:
        client.close()


def test_a_tenant_lost_from_neo4j_is_restored_from_qdrant(
    api: TestClient, neo4j_driver: neo4j.Driver, workers: Workers, settings: Settings, tenant: str
) -> None:
    # Given a tenant's documents in both stores (one long, so it has several chunks and NEXT)
    documents: list[dict[str, object]] = [
        {"user_id": tenant, "id": key, "text": text, "title": key.title(), "source": "facts"}
        for key, text in FACTS.items()
    ]
    documents.append(
        {
            "user_id": tenant,
            "id": "field-notes",
            "text": long_text(),
            "uri": "https://example.org/notes",
            "tags": ["wildlife", "notes"],
            "metadata": {"observer": "kim", "pages": 3},
            "created_at": "2024-05-01T12:00:00Z",
        }
    )
    ids = post_documents(api, documents)
    wait_until_finished(api, tenant, ids)
    before = _memories(neo4j_driver, tenant)
    counts = tenant_counts(neo4j_driver, tenant)
    assert counts["next"] > 0 and all(row["sync"] == "synced" for row in before)

    # When the tenant's nodes are lost from Neo4j and it is restored from Qdrant
    cypher(
        neo4j_driver, "MATCH (n) WHERE (n:Memory OR n:Document) AND n.user_id = $u DETACH DELETE n", u=tenant
    )
    assert tenant_counts(neo4j_driver, tenant)["memories"] == 0
    dry = _restore(settings, tenant=tenant, dry_run=True)
    assert tenant_counts(neo4j_driver, tenant)["memories"] == 0
    report = _restore(settings, tenant=tenant)

    # Then every Memory is back as it was, with its document, relations and vector, and synced
    assert dry["restored"] == len(before) and dry["dry_run"]
    assert tenant_counts(neo4j_driver, tenant) == counts
    assert (report["restored"], report["synced"], report["unreadable_count"]) == (len(before), len(before), 0)
    after = _memories(neo4j_driver, tenant)
    assert [row["sync"] for row in after] == ["synced"] * len(before)
    for old, new in zip(before, after, strict=True):
        assert {k: v for k, v in new.items() if k not in ("embedding", "sync")} == {
            k: v for k, v in old.items() if k not in ("embedding", "sync")
        }
        assert new["embedding"] == pytest.approx(old["embedding"], abs=1e-6)

    # And running it again changes nothing (idempotent): all of it is already there
    again = _restore(settings, tenant=tenant, fresh=True)
    assert again["restored"] == len(before) and tenant_counts(neo4j_driver, tenant) == counts


def test_restore_to_qdrant_rebuilds_the_points_with_the_document_fields(
    api: TestClient, neo4j_driver: neo4j.Driver, workers: Workers, settings: Settings, tenant: str
) -> None:
    # Given a tenant's documents stored
    ids = post_documents(
        api, [{"user_id": tenant, "id": key, "text": text, "source": "facts"} for key, text in FACTS.items()]
    )
    wait_until_finished(api, tenant, ids)

    # When Qdrant is rebuilt from Neo4j for that tenant (as --migrate-payloads does)
    report = _restore(settings, to="qdrant", tenant=tenant)

    # Then each point holds the Memory and its document's fields, which a restore needs
    assert (report["restored"], report["failed"]) == (len(FACTS), 0)
    with qdrant_reader(workers, settings) as store:
        points = tenant_points(store, tenant)
    assert len(points) == len(FACTS)
    for point in points.values():
        payload = point.payload
        assert payload["document"]["source"] == "facts"
        assert payload["document"]["ingested_at"] and payload["updated_at"]


def test_the_admin_restore_call_is_for_admin_keys_only(api: TestClient, keys: KeyMaker, tenant: str) -> None:
    tenant_key = {"Authorization": f"Bearer {keys(tenant).key}"}

    refused = api.post("/api/admin/restore", json={"user_id": tenant, "dry_run": True}, headers=tenant_key)
    started = api.post("/api/admin/restore", json={"user_id": tenant, "dry_run": True})
    bad = api.post("/api/admin/restore", json={"to": "elsewhere"})

    assert refused.status_code == 403
    assert started.status_code == 202 and started.json()["task_id"]
    assert bad.status_code == 422
    assert api.get("/api/admin/restore", params={"to": "neo4j"}).status_code == 200


def test_status_shows_points_in_qdrant_beside_memories_in_neo4j(
    api: TestClient, workers: Workers, settings: Settings, tenant: str
) -> None:
    # Given a stored document and a reconcile pass (it counts the points: only the owner of the
    # embedded folder may open it)
    ids = post_documents(api, [{"user_id": tenant, "id": "tides", "text": FACTS["tides"]}])
    wait_until_finished(api, tenant, ids)
    client = EngramClient(settings)
    try:
        report = client.reconcile(timeout_s=120)
        stores = client.overview()["stores"]
    finally:
        client.close()

    # Then the status shows both counts, as that pass found them, and the primary is not lost
    assert report["primary_lost"] is None and report["neo4j_memories"] >= 1
    assert stores["qdrant_points"] == sum(report["qdrant_points"].values()) >= 1
    assert stores["neo4j_memories"] >= 1 and stores["store_id"] and stores["primary_lost"] is None
    assert api.get("/api/status").json()["stores"]["qdrant_points"] == stores["qdrant_points"]
    assert api.get("/healthz").json()["primary_lost"] is None


def test_an_online_backup_file_restores_a_tenant_without_qdrant(
    api: TestClient,
    neo4j_driver: neo4j.Driver,
    workers: Workers,
    settings: Settings,
    tenant: str,
    tmp_path: Path,
) -> None:
    # Given a tenant's documents exported by engram backup
    documents: list[dict[str, object]] = [
        {
            "user_id": tenant,
            "id": "field-notes",
            "text": long_text(),
            "source": "notebook",
            "metadata": {"n": 1},
        }
    ]
    ids = post_documents(api, documents)
    wait_until_finished(api, tenant, ids)
    before = _memories(neo4j_driver, tenant)
    folder = tmp_path / "backup"
    assert cli_main(["backup", str(folder), "--tenant", tenant]) == 0
    (backup,) = folder.glob("neo4j-*.jsonl")

    # When the tenant is lost from Neo4j and restored from the file
    cypher(
        neo4j_driver, "MATCH (n) WHERE (n:Memory OR n:Document) AND n.user_id = $u DETACH DELETE n", u=tenant
    )
    assert cli_main(["restore", "--from", str(backup), "--tenant", tenant, "--fresh"]) == 0

    # Then it is back as it was, pending until the reconciler has checked Qdrant holds it
    after = _memories(neo4j_driver, tenant)
    assert len(after) == len(before) > 1
    assert {row["sync"] for row in after} == {"pending"}
    for old, new in zip(before, after, strict=True):
        assert {k: v for k, v in new.items() if k not in ("embedding", "sync")} == {
            k: v for k, v in old.items() if k not in ("embedding", "sync")
        }
        assert new["embedding"] == pytest.approx(old["embedding"], abs=1e-6)


CONVERSATION_GRAPH = """
MATCH (s:Session {user_id: $u})-[:HAS_TURN]->(m:Memory)
OPTIONAL MATCH (m)-[:NEXT]->(n:Memory)
OPTIONAL MATCH (m)-[:MENTIONS]->(e:Entity)
RETURN s.session_id AS session, m.document_id AS turn, n.document_id AS next,
       collect(DISTINCT e.name) AS entities
ORDER BY session, turn
"""


def conversation_graph(driver: neo4j.Driver, tenant: str) -> list[dict[str, object]]:
    """The tenant's sessions, turns, next turns and entities; entity names sorted (collect's
    order is the store's)."""
    rows = cypher(driver, CONVERSATION_GRAPH, u=tenant)
    return [{**row, "entities": sorted(row["entities"])} for row in rows]


def test_a_restored_conversation_has_its_sessions_turn_order_and_entities_again(
    api: TestClient, neo4j_driver: neo4j.Driver, workers: Workers, settings: Settings, tenant: str
) -> None:
    # Given a conversation posted out of order (positions say the order), in both stores
    turns = [
        (2, "Maya: Then we drove to Lisbon with Tomas."),
        (0, "Maya: I met Tomas at the Porto market on Sunday."),
        (1, "Tomas: Porto was lovely, and Maya bought figs."),
    ]
    documents = [
        {
            "user_id": tenant,
            "id": f"t{position}",
            "text": text,
            "session_id": "s1",
            "memory_type": "turn",
            "position": position,
        }
        for position, text in turns
    ]
    wait_until_finished(api, tenant, post_documents(api, documents))
    before = conversation_graph(neo4j_driver, tenant)
    assert [(row["turn"], row["next"]) for row in before] == [("t0", "t1"), ("t1", "t2"), ("t2", None)]
    assert any(row["entities"] for row in before)

    # When everything of the tenant is lost from Neo4j (sessions and entities too) and restored
    cypher(neo4j_driver, "MATCH (n) WHERE n.user_id = $u DETACH DELETE n", u=tenant)
    assert conversation_graph(neo4j_driver, tenant) == []
    report = _restore(settings, tenant=tenant)

    # Then the session, its turns in order and what they mention are derived again
    assert report["restored"] == 3
    assert conversation_graph(neo4j_driver, tenant) == before
