"""Scheduled reconcile passes sweeping the real stores a budget at a time (shared/services/sweep.py)."""

from __future__ import annotations

import json
import math
from typing import Any

import neo4j
import pytest
from fastapi.testclient import TestClient

from shared.settings import Settings
from tests.integration.documents import FACTS, long_text, post_documents
from tests.integration.parity import assert_parity, memories
from tests.integration.support import ANY_VERSION, Workers, cypher, qdrant_reader, wait_until_finished
from workers.app import RECONCILE_TASK
from workers.app import app as celery_app

pytestmark = [pytest.mark.integration, pytest.mark.backup]

PASSES_A_ROUND = 4


def _scheduled_pass() -> dict[str, Any]:
    """A pass as beat sends it."""
    report: dict[str, Any] = celery_app.send_task(RECONCILE_TASK, kwargs={"scheduled": True}).get(timeout=300)
    return report


def test_scheduled_passes_sweep_the_store_in_slices_and_repair_drift_made_by_hand(
    api: TestClient, neo4j_driver: neo4j.Driver, workers: Workers, settings: Settings, tenant: str
) -> None:
    # Given synced memories (enough for a sweep of several passes in a store of this tenant alone),
    # two of whose points are deleted from Qdrant by hand and one of which is deleted from Neo4j by
    # hand (its point is now an orphan)
    documents = [{"user_id": tenant, "id": key, "text": text} for key, text in FACTS.items()]
    documents += [{"user_id": tenant, "id": f"long-{i}", "text": long_text(50 + 5 * i)} for i in range(8)]
    post_documents(api, documents)
    wait_until_finished(api, tenant, [str(d["id"]) for d in documents])
    ids = sorted(memories(neo4j_driver, tenant))
    with qdrant_reader(workers, settings) as store:
        # (Neo4j and the backup order ids alike, as the sweep's ranges need: lowercase uuids)
        scrolled, after = [], None
        while True:
            page, after = store.scroll(after, 1000)
            scrolled += [p.id for p in page]
            if after is None:
                break
        store.delete({point_id: ANY_VERSION for point_id in ids[:2]})
    in_neo4j = [row["id"] for row in cypher(neo4j_driver, "MATCH (m:Memory) RETURN m.id AS id ORDER BY m.id")]
    assert scrolled == sorted(scrolled) and in_neo4j == sorted(in_neo4j)
    cypher(neo4j_driver, "MATCH (m:Memory {id: $id}) DETACH DELETE m", id=ids[2])

    # and a write worker whose scheduled passes compare a quarter of the store each, from the first id
    budget = max(10, math.ceil(len(scrolled) / PASSES_A_ROUND))
    cypher(neo4j_driver, "MATCH (s:EngramSchema {id: 'reconcile_sweep'}) DELETE s")
    workers.restart("write", ENGRAM_RECONCILE_SCAN_BUDGET=str(budget), ENGRAM_RECONCILE_SCAN_PAGE="10")
    try:
        # When scheduled passes run until their sweep has ended its round
        reports = [_scheduled_pass()]
        while reports[-1]["sweep"]["rounds"] == 0:
            reports.append(_scheduled_pass())
            assert len(reports) <= 3 * PASSES_A_ROUND, "the sweep never ended its round"
        saved = cypher(neo4j_driver, "MATCH (s:EngramSchema {id: 'reconcile_sweep'}) RETURN s.cursor AS c")
    finally:
        workers.restart("write")

    # Then every pass compared at most its budget, the round took several, and what was made by
    # hand is repaired
    assert all(r["error"] is None and r["scan_budget"] == budget for r in reports)
    assert all(r["memories_compared"] <= budget for r in reports)
    assert all(n <= budget for r in reports for n in r["points_compared"].values())
    assert len(reports) >= 3
    found = {
        kind: sum(r["drift_found"][kind] for r in reports) for kind in ("missing_in_qdrant", "orphan_points")
    }
    assert found["missing_in_qdrant"] >= 2 and found["orphan_points"] >= 1
    assert json.loads(saved[0]["c"]) == reports[-1]["sweep"]
    stored = assert_parity(neo4j_driver, workers, settings, tenant)
    assert set(stored) == set(ids) - {ids[2]}
