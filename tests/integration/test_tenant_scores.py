"""One tenant's data changes nothing in another tenant's search: not which memories it finds, not
their order, not their scores.

This fails while search takes its fulltext and vector candidates across all tenants before the
tenant filter (a tenant with many matching memories crowds another's out of the candidates, and
the fulltext score moves with every tenant's words).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.integration.support import KeyMaker, wait_until_finished
from tests.integration.tenants import Acting, acting_as

pytestmark = pytest.mark.integration

QUERY = "How does the moon pull the ocean into tides?"
OWN = {
    "tides": "Tides rise and fall twice a day as the moon's gravity pulls the ocean toward it.",
    "spring-tides": "Spring tides are the highest: the sun and the moon pull the ocean together.",
    "harbour": "The harbour master posts the times of high and low water every morning.",
    "bread": "Sourdough bread needs a starter, flour, water and a long slow rise.",
}


def _ranking(tenant: Acting) -> list[tuple[str, float, float]]:
    body = {"query": QUERY, "top_k": 10, "threshold": -1.0}
    response = tenant.post("/api/memory/semantic-search", json=body)
    assert response.status_code == 200, response.text
    return [(r["document_id"], r["score"], r["similarity_score"]) for r in response.json()["results"]]


def _ingest(api: TestClient, tenant: Acting, texts: dict[str, str]) -> None:
    documents: list[dict[str, Any]] = [{"id": key, "text": text} for key, text in texts.items()]
    response = tenant.post("/api/documents", json={"documents": documents})
    assert response.status_code == 202, response.text
    statuses = wait_until_finished(api, tenant.tenant, list(texts), timeout_s=300)
    assert {status["state"] for status in statuses.values()} == {"done"}


def test_another_tenants_matching_data_changes_nothing_in_b_s_scores(api: TestClient, keys: KeyMaker) -> None:
    # Given tenant B's own memories, and its ranking for a fixed query
    bob = acting_as(keys, f"bob-{uuid.uuid4().hex[:10]}")
    alice = acting_as(keys, f"alice-{uuid.uuid4().hex[:10]}")
    _ingest(api, bob, OWN)
    before = _ranking(bob)
    assert {document_id for document_id, _, _ in before} == set(OWN)

    # When tenant A ingests many memories that match the query better than B's do
    crowd = {
        f"moon-{n}": f"The moon pulls the ocean into tides, high tide number {n}: how the moon's gravity "
        f"pulls ocean water into tides."
        for n in range(60)
    }
    _ingest(api, alice, crowd)
    after = _ranking(bob)

    # Then B finds the same memories in the same order with the same scores
    assert [document_id for document_id, _, _ in after] == [document_id for document_id, _, _ in before]
    expected: list[tuple[str, Any, Any]] = [
        (document_id, pytest.approx(score, abs=1e-9), pytest.approx(similarity, abs=1e-9))
        for document_id, score, similarity in before
    ]
    assert after == expected
