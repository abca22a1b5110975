"""Search against the real Neo4j: a tenant of 1% is never starved on either side, another
tenant's data changes nothing in a tenant's scores, and every explanation is the truth."""

from __future__ import annotations

import math
from typing import Any

import neo4j
import pytest
from fastapi.testclient import TestClient

from shared.search.text import query_terms, stems, tenant_token, term_counts, term_vector
from shared.settings import Settings
from shared.stores.neo4j import Neo4jStore
from shared.stores.neo4j.search_queries import FULLTEXT_INDEX
from tests.integration.support import bootstrap_over_earlier_fulltext_index, cypher, wait_until_finished

pytestmark = pytest.mark.integration

QUERY = "otter swimming in the river"
SMALL = [
    "The otter slid down the muddy bank into the river.",
    "An otter family lives under the old mill.",
    "River water was cold in March, too cold for swimming.",
]
METHODS = ("engram", "bm25", "vector", "rrf")


def post(api: TestClient, documents: list[dict[str, Any]]) -> None:
    for start in range(0, len(documents), 500):
        response = api.post("/api/documents", json=documents[start : start + 500])
        assert response.status_code == 202, response.text
    wait_until_finished(api, documents[0]["user_id"], [d["id"] for d in documents], timeout_s=900)


def search(api: TestClient, **body: Any) -> dict[str, Any]:
    response = api.post("/api/memory/semantic-search", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def scored(answer: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (r["id"], r["score"], r["similarity_score"], r["explanation"]["keyword"], r["explanation"]["fused"])
        for r in answer["results"]
    ]


def test_a_one_percent_tenant_is_found_on_both_sides_and_no_other_tenant_moves_its_scores(
    api: TestClient, neo4j_driver: neo4j.Driver, tenant: str
) -> None:
    # Given a small tenant of 3 memories, searched once with every method
    post(api, [{"user_id": tenant, "id": f"small-{i}", "text": text} for i, text in enumerate(SMALL)])
    before = {m: search(api, query=QUERY, user_id=tenant, top_k=3, method=m) for m in METHODS}

    # When another tenant ingests 297 memories that all match the query better, in words and meaning
    other = f"{tenant}-big"
    post(
        api,
        [
            {
                "user_id": other,
                "id": f"big-{i}",
                "text": f"A river otter swimming in the river, otter number {i}.",
            }
            for i in range(297)
        ],
    )
    after = {m: search(api, query=QUERY, user_id=tenant, top_k=3, method=m) for m in METHODS}

    # Then the small tenant (1% of these memories) still gets all of its matches from both sides,
    # with keyword scores, and every score and place is exactly what it was
    for method in METHODS:
        assert scored(after[method]) == scored(before[method]), method
    assert {r["document_id"] for r in after["vector"]["results"]} == {"small-0", "small-1", "small-2"}
    assert {r["document_id"] for r in after["bm25"]["results"]} == {"small-0", "small-1", "small-2"}
    assert all(r["explanation"]["keyword"] > 0 for r in after["engram"]["results"])

    # (Lucene's limit over every tenant, the old way, would have left it no keyword candidate)
    crowded = cypher(
        neo4j_driver,
        "CALL db.index.fulltext.queryNodes($fulltext, 'content:(otter swimming river)', {limit: 12}) "
        "YIELD node RETURN count(CASE WHEN node.user_id = $u THEN 1 END) AS mine",
        u=tenant,
        fulltext=FULLTEXT_INDEX,
    )
    assert crowded[0]["mine"] == 0


def test_the_keyword_score_is_bm25_with_the_tenants_own_statistics(
    api: TestClient, neo4j_driver: neo4j.Driver, tenant: str
) -> None:
    post(api, [{"user_id": tenant, "id": f"small-{i}", "text": text} for i, text in enumerate(SMALL)])

    answer = search(api, query=QUERY, user_id=tenant, top_k=3, method="bm25")

    rows = cypher(
        neo4j_driver,
        "MATCH (m:Memory {user_id: $u}) RETURN m.id AS id, m.content AS content, m.token_count AS n",
        u=tenant,
    )
    average = sum(r["n"] for r in rows) / len(rows)
    terms = stems(query_terms(QUERY))
    df = {t: sum(t in term_counts(r["content"]) for r in rows) for t in set(terms)}
    expected = {}
    for r in rows:
        counts = term_counts(r["content"])
        score = 0.0
        for t in terms:
            if counts[t]:
                idf = math.log(1 + (len(rows) - df[t] + 0.5) / (df[t] + 0.5))
                norm = 1.2 * (1 - 0.75 + 0.75 * r["n"] / average)
                score += idf * counts[t] * 2.2 / (counts[t] + norm)
        expected[r["id"]] = score
    got = {r["id"]: r["explanation"]["keyword"] for r in answer["results"]}
    assert got == pytest.approx({k: v for k, v in expected.items() if v > 0}, abs=1e-5)
    assert [r["explanation"]["keyword_rank"] for r in answer["results"]] == list(range(1, len(got) + 1))


def test_each_memory_keeps_its_term_vector_and_a_memory_without_one_scores_the_same(
    api: TestClient, neo4j_driver: neo4j.Driver, settings: Settings, tenant: str
) -> None:
    # Given memories written by the pipeline
    post(api, [{"user_id": tenant, "id": f"small-{i}", "text": text} for i, text in enumerate(SMALL)])
    read = "MATCH (m:Memory {user_id: $u}) RETURN m.id AS id, m.content AS content, m.term_vector AS v"

    # Then each keeps its content's terms counted, which the keyword scores are read from
    assert {r["id"]: r["v"] for r in cypher(neo4j_driver, read, u=tenant)} == {
        r["id"]: term_vector(r["content"]) for r in cypher(neo4j_driver, read, u=tenant)
    }
    keywords = lambda: [(r[0], r[3]) for r in scored(search(api, query=QUERY, user_id=tenant, top_k=3))]  # noqa: E731
    kept = keywords()
    assert any(keyword for _, keyword in kept)

    # When the vectors are gone (memories written before the store kept them) or made the first
    # way (tv1: a stemmer the write worker's threads shared, here one with a wrong count)
    cypher(neo4j_driver, "MATCH (m:Memory {user_id: $u}) REMOVE m.term_vector", u=tenant)
    stale = "MATCH (m:Memory {user_id: $u}) WHERE m.content = $first SET m.term_vector = 'tv1 otter:9 '"
    cypher(neo4j_driver, stale, u=tenant, first=SMALL[0])

    # Then every keyword score is the same, counted from the text
    assert keywords() == kept

    # And the graph's backfill gives them back
    store = Neo4jStore(settings)
    try:
        assert store.derive_graph(store.memory_ids_page(tenant, None, 100)) == len(SMALL)
    finally:
        store.close()
    assert {r["id"]: r["v"] for r in cypher(neo4j_driver, read, u=tenant)} == {
        r["id"]: term_vector(r["content"]) for r in cypher(neo4j_driver, read, u=tenant)
    }


def test_memories_written_before_tenant_tokens_get_theirs_and_are_found_by_their_words(
    api: TestClient, neo4j_driver: neo4j.Driver, settings: Settings, tenant: str
) -> None:
    # Given a tenant's memories, each holding its tenant's token (one term of the fulltext index),
    # and a second tenant whose id holds the first one's words
    post(api, [{"user_id": tenant, "id": f"small-{i}", "text": text} for i, text in enumerate(SMALL)])
    wider = f"{tenant} x"
    post(api, [{"user_id": wider, "id": "wide", "text": SMALL[0]}])
    tokens = (
        "MATCH (m:Memory) WHERE m.user_id IN $u RETURN m.user_id AS u, collect(DISTINCT m.tenant_token) AS t"
    )
    assert {r["u"]: r["t"] for r in cypher(neo4j_driver, tokens, u=[tenant, wider])} == {
        tenant: [tenant_token(tenant)],
        wider: [tenant_token(wider)],
    }
    kept = scored(search(api, query=QUERY, user_id=tenant, top_k=3, method="bm25"))
    assert len(kept) == 3

    # When the store is as an earlier version left it: no tokens, the tenant in the index by its
    # id's words, and a process of this version makes its schema
    cypher(neo4j_driver, "MATCH (m:Memory) WHERE m.user_id IN $u REMOVE m.tenant_token", u=[tenant, wider])
    bootstrap_over_earlier_fulltext_index(
        settings,
        neo4j_driver,
        "CREATE FULLTEXT INDEX memory_content_english FOR (m:Memory) ON EACH [m.content, m.user_id] "
        "OPTIONS {indexConfig: {`fulltext.analyzer`: 'english'}}",
    )

    # Then every memory has its tenant's token, the index holds them in place of the old one,
    # and the tenant's words find its memories with the scores they had
    assert {r["u"]: r["t"] for r in cypher(neo4j_driver, tokens, u=[tenant, wider])} == {
        tenant: [tenant_token(tenant)],
        wider: [tenant_token(wider)],
    }
    names = "SHOW FULLTEXT INDEXES YIELD name, state, properties RETURN name, state, properties"
    assert [(r["name"], r["state"], r["properties"]) for r in cypher(neo4j_driver, names)] == [
        (FULLTEXT_INDEX, "ONLINE", ["content", "tenant_token"])
    ]
    assert scored(search(api, query=QUERY, user_id=tenant, top_k=3, method="bm25")) == kept


def test_engram_explains_each_score_and_the_threshold_cuts_on_similarity(
    api: TestClient, tenant: str
) -> None:
    post(api, [{"user_id": tenant, "id": f"small-{i}", "text": text} for i, text in enumerate(SMALL)])

    answer = search(api, query=QUERY, user_id=tenant, top_k=3)
    results = answer["results"]

    assert answer["method"] == "engram" and len(results) == 3
    for r in results:
        e = r["explanation"]
        assert e["similarity"] == r["similarity_score"] and e["score"] == r["score"]
        assert e["vector_rank"] in (1, 2, 3) and e["fused"] == pytest.approx(r["score"])
    assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)
    cut = sorted(r["similarity_score"] for r in results)[1] - 1e-5
    above = search(api, query=QUERY, user_id=tenant, top_k=3, threshold=cut)
    assert {r["id"] for r in above["results"]} == {r["id"] for r in results if r["similarity_score"] >= cut}
    assert len(above["results"]) == 2


def test_neighbours_and_the_token_budget(api: TestClient, tenant: str) -> None:
    sentences = [
        f"Paragraph {i} talks about topic number {i} at some length, for the chunker." for i in range(120)
    ]
    sentences[60] = "The buried treasure lies under the third oak by the well."
    post(api, [{"user_id": tenant, "id": "long", "text": " ".join(sentences)}])

    answer = search(api, query="where is the buried treasure", user_id=tenant, top_k=1, neighbours=1)
    (found,) = answer["results"]
    assert "treasure" in found["content"]
    assert len(found["before"]) == 1 and len(found["after"]) == 1
    assert "Paragraph" in found["before"][0] and "Paragraph" in found["after"][0]

    budgeted = search(api, query="where is the buried treasure", user_id=tenant, top_k=5, token_budget=300)
    assert budgeted["context_tokens"] <= 300 and budgeted["context"].startswith("[1] ")
    assert 1 <= budgeted["count"] < 5


def test_the_keyword_side_finds_a_memory_by_another_form_of_its_words(api: TestClient, tenant: str) -> None:
    # Given conversation turns that say "hiked" and "Alice's", and one about something else
    turns = [
        "Alice's brother hiked up Mount Tam on Saturday.",
        "We booked the dentist for Tuesday at nine.",
        "The stock of flour ran out at the bakery.",
    ]
    post(api, [{"user_id": tenant, "id": f"turn-{i}", "text": text} for i, text in enumerate(turns)])

    # When the keyword side alone is asked in other forms of those words
    answer = search(api, query="when did alice go hiking", user_id=tenant, top_k=3, method="bm25")

    # Then the fulltext index (stems) finds the turn, and its keyword score counts both words
    assert [r["document_id"] for r in answer["results"]] == ["turn-0"]
    one_word = search(api, query="hiking", user_id=tenant, top_k=3, method="bm25")["results"][0]
    assert answer["results"][0]["explanation"]["keyword"] > one_word["explanation"]["keyword"] > 0
