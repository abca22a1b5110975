"""Search through the query queue: filters inside the query, never starved, true cosine scores."""

from __future__ import annotations

from typing import Any

import neo4j
import numpy as np
import pytest
from fastapi.testclient import TestClient

from shared.container import Container
from shared.embedding import make_embedder
from shared.search.fusion import feedback_vector, unit
from shared.settings import Settings
from tests.integration.support import wait_until_finished

pytestmark = pytest.mark.integration

TOPICS = [
    "Bicycle gear ratios trade pedalling speed for force when climbing hills.",
    "Composting turns kitchen scraps into humus with the help of worms and microbes.",
    "Jet lag comes from a body clock that still runs on the time zone you left.",
    "Coffee extraction pulls flavour from ground beans; too fine a grind tastes bitter.",
    "The printing press of Gutenberg spread books across Europe in the fifteenth century.",
    "Credit card interest compounds monthly on any balance not paid in full.",
    "Vaccines train the immune system with a harmless piece of a germ.",
    "Glaciers carve U-shaped valleys as they slide slowly downhill.",
]


def search(api: TestClient, **body: Any) -> dict[str, Any]:
    response = api.post("/api/memory/semantic-search", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def ingest_topics(api: TestClient, tenant: str) -> None:
    documents = [
        {
            "user_id": tenant,
            "id": f"topic-{i}",
            "text": text,
            "project_id": "rare" if i < 2 else "common",
            "session_id": f"s{i % 2}",
            "memory_type": "fact" if i % 2 else "note",
            "tags": ["even"] if i % 2 == 0 else ["odd"],
        }
        for i, text in enumerate(TOPICS)
    ]
    response = api.post("/api/documents", json=documents)
    assert response.status_code == 202, response.text
    wait_until_finished(api, tenant, [d["id"] for d in documents])  # type: ignore[misc]


def test_filters_apply_inside_the_query_and_never_starve_top_k(api: TestClient, tenant: str) -> None:
    ingest_topics(api, tenant)

    # A filter that only 2 of this tenant's memories pass still returns both, and nothing else
    rare = search(api, query="money owed on a card", user_id=tenant, top_k=2, filters={"project_id": "rare"})
    assert {r["document_id"] for r in rare["results"]} == {"topic-0", "topic-1"}

    by_type = search(
        api, query="anything at all", user_id=tenant, top_k=10, filters={"memory_types": ["fact"]}
    )
    assert by_type["count"] == 4 and all(r["memory_type"] == "fact" for r in by_type["results"])

    by_session = search(api, query="travel", user_id=tenant, top_k=10, filters={"session_id": "s0"})
    assert by_session["count"] == 4 and all(r["session_id"] == "s0" for r in by_session["results"])

    by_tag = search(api, query="science", user_id=tenant, top_k=10, filters={"tags": ["odd"]})
    assert by_tag["count"] == 4 and all(r["tags"] == ["odd"] for r in by_tag["results"])

    one_doc = search(api, query="books", user_id=tenant, top_k=5, filters={"document_id": "topic-4"})
    assert [r["document_id"] for r in one_doc["results"]] == ["topic-4"]

    future = search(
        api, query="books", user_id=tenant, top_k=5, filters={"from_date": "2999-01-01T00:00:00Z"}
    )
    assert future["results"] == []

    active = search(api, query="books", user_id=tenant, top_k=5, filters={"statuses": ["active"]})
    archived = search(api, query="books", user_id=tenant, top_k=5, filters={"statuses": ["archived"]})
    assert active["count"] == 5 and archived["results"] == []


def test_similarity_is_the_true_cosine_and_threshold_cuts_on_it(
    api: TestClient, settings: Settings, tenant: str
) -> None:
    ingest_topics(api, tenant)
    query = "why am I tired after flying east"

    answer = search(api, query=query, user_id=tenant, top_k=len(TOPICS))

    embedder = make_embedder(settings)
    expected = embedder.embed(TOPICS) @ embedder.embed_query(query)
    got = {r["document_id"]: r["similarity_score"] for r in answer["results"]}
    for i, cosine in enumerate(expected):
        assert got[f"topic-{i}"] == pytest.approx(float(cosine), abs=1e-3)
    assert answer["results"][0]["document_id"] == "topic-2"

    cut = float(np.sort(expected)[-3])
    above = search(api, query=query, user_id=tenant, top_k=len(TOPICS), threshold=cut - 1e-4)
    assert above["count"] == 3
    assert all(r["similarity_score"] >= cut - 1e-3 for r in above["results"])


def test_duplicate_content_is_returned_once(api: TestClient, tenant: str) -> None:
    text = "The lighthouse keeper logs every passing ship in a leather-bound book."
    response = api.post(
        "/api/documents",
        json=[
            {"user_id": tenant, "id": "copy-a", "text": text},
            {"user_id": tenant, "id": "copy-b", "text": text},
        ],
    )
    assert response.status_code == 202
    wait_until_finished(api, tenant, ["copy-a", "copy-b"])

    answer = search(api, query="who records ships", user_id=tenant, top_k=5)

    assert answer["count"] == 1
    assert answer["results"][0]["content"] == text


def test_feedback_read_moves_the_query_as_rocchio_does(
    api: TestClient, settings: Settings, tenant: str, neo4j_driver: neo4j.Driver
) -> None:
    """The feedback round's one read (moved vector and both cosines inside Neo4j) agrees with
    Rocchio computed here from the stored vectors; a memory of another tenant neither moves the
    query nor is scored."""
    ingest_topics(api, tenant)
    other = f"{tenant}-other"
    ingest_topics(api, other)
    rows, _, _ = neo4j_driver.execute_query(
        "MATCH (m:Memory) WHERE m.user_id IN [$a, $b] RETURN m.id AS id, m.user_id AS user, m.embedding AS v",
        a=tenant,
        b=other,
    )
    vectors = {row["id"]: np.asarray(row["v"], dtype=np.float64) for row in rows}
    own = sorted(row["id"] for row in rows if row["user"] == tenant)
    foreign = sorted(row["id"] for row in rows if row["user"] == other)
    query = make_embedder(settings).embed_query("why am I tired after flying east")
    best = own[:3]
    container = Container(settings)
    try:
        moved, scores = container.search_graph.feedback_scores(
            tenant, [*best, foreign[0]], [*own, foreign[1]], unit(query), 0.7
        )
    finally:
        container.close()

    expected = np.asarray(feedback_vector(query, [vectors[i] for i in best], 0.7))
    assert np.asarray(unit(moved)) == pytest.approx(expected, abs=1e-6)
    assert set(scores) == set(own)
    q = np.asarray(unit(query))
    for memory_id, (original, towards) in scores.items():
        v = vectors[memory_id] / np.linalg.norm(vectors[memory_id])
        assert original == pytest.approx((1 + float(v @ q)) / 2, abs=1e-6)
        assert towards == pytest.approx((1 + float(v @ expected)) / 2, abs=1e-6)
