"""Conversations through the real queues: turns posted out of order in separate requests end in
order, `neighbours` returns the turns around a hit, entities reach GET /api/entities (and its
bad input is a 4xx), the CLI shows and backfills them, and the graph's search sources add
candidates when switched on."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import neo4j
import pytest
from fastapi.testclient import TestClient

from shared.container import Container
from shared.ids import memory_id
from shared.models import SearchFilters
from shared.search import Query, Searcher, query_terms
from shared.settings import Settings
from shared.stores.neo4j import Neo4jStore
from tests.integration.support import ROOT, cypher, wait_until_finished

pytestmark = pytest.mark.integration
ENGRAM = str(Path(sys.executable).with_name("engram"))
T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)

TURNS = [
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
    "Melanie: That sounds amazing, Caroline! What happened there?",
    "Caroline: People shared their transgender stories; I felt accepted.",
    "Melanie: I'm painting a sunrise over Lake Tahoe for my kids.",
    "Caroline: Lovely! I want to study counseling at Stanford next year.",
]


def post_turns(api: TestClient, tenant: str, order: list[int], session: str = "conv-1") -> None:
    """Each turn its own request, in ``order``, as a chat client posting late would."""
    for n in order:
        body = {
            "user_id": tenant,
            "id": f"turn-{n}",
            "text": TURNS[n],
            "session_id": session,
            "memory_type": "turn",
            "created_at": (T0 + timedelta(seconds=n)).isoformat(),
        }
        response = api.post("/api/documents", json=body)
        assert response.status_code == 202, response.text
    wait_until_finished(api, tenant, [f"turn-{n}" for n in order])


def search(api: TestClient, **body: Any) -> dict[str, Any]:
    response = api.post("/api/memory/semantic-search", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_turns_posted_out_of_order_are_neighbours_in_order(
    api: TestClient, neo4j_driver: neo4j.Driver, tenant: str
) -> None:
    # Given five turns of one session, posted one request each in a shuffled order
    post_turns(api, tenant, [4, 1, 3, 0, 2])

    # Then a hit on the middle turn comes with the turns before and after it, in order
    answer = search(api, query="transgender stories accepted", user_id=tenant, top_k=1, neighbours=2)
    (hit,) = answer["results"]
    assert hit["content"] == TURNS[2]
    assert hit["before"] == TURNS[0:2]
    assert hit["after"] == TURNS[3:5]
    sessions = cypher(
        neo4j_driver,
        "MATCH (s:Session {user_id: $u})-[:HAS_TURN]->(m) RETURN s.session_id AS s, count(m) AS n",
        u=tenant,
    )
    assert sessions == [{"s": "conv-1", "n": 5}]


def test_entities_are_listed_searched_and_shown_for_the_keys_tenant(
    api: TestClient, keys: Any, tenant: str
) -> None:
    post_turns(api, tenant, [0, 1, 2, 3, 4])

    # A tenant key sees its own tenant's entities, most mentioned first
    own = {"Authorization": f"Bearer {keys(tenant).key}"}
    listed = api.get("/api/entities", headers=own)
    assert listed.status_code == 200, listed.text
    names = {e["key"]: e for e in listed.json()["entities"]}
    assert names["caroline"]["memories"] == 4  # three turns of hers, one naming her
    assert names["caroline"]["kind"] == "person"
    assert {"melanie", "lgbtq", "lake tahoe", "stanford"} <= set(names)
    assert listed.json()["entities"][0]["key"] == "caroline"

    # Searched by a name's start (case-blind) or a part of it, and by kind
    by_prefix = api.get("/api/entities", params={"prefix": "STAN"}, headers=own).json()
    assert [e["key"] for e in by_prefix["entities"]] == ["stanford"]
    by_text = api.get("/api/entities", params={"q": "tahoe"}, headers=own).json()
    assert [e["key"] for e in by_text["entities"]] == ["lake tahoe"]
    people = api.get("/api/entities", params={"kind": "person"}, headers=own).json()
    assert {e["key"] for e in people["entities"]} >= {"caroline", "melanie"}
    paged = api.get("/api/entities", params={"limit": 1}, headers=own).json()
    assert len(paged["entities"]) == 1 and paged["next_offset"] == 1

    # One entity, by any way of writing it, with its memories and the entities named with it
    shown = api.get("/api/entities/The Caroline's", headers=own)
    assert shown.status_code == 200, shown.text
    entity = shown.json()
    assert len(entity["mentioned_in"]) == 4
    related = {r["key"]: r for r in entity["related"]}
    assert related["melanie"]["count"] == 1
    assert related["melanie"]["memory_ids"] == [memory_id(tenant, "turn-1", 0)]

    # Another tenant's key sees none of them; an admin key must name the tenant
    other = {"Authorization": f"Bearer {keys(f'{tenant}-other').key}"}
    assert api.get("/api/entities", headers=other).json()["entities"] == []
    assert api.get("/api/entities/caroline", headers=other).status_code == 404
    assert api.get("/api/entities", params={"user_id": tenant}).status_code == 200
    assert api.get("/api/entities", params={"user_id": tenant}, headers=other).status_code == 403


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/api/entities", {"prefix": " x"}),
        ("/api/entities", {"q": "x\u200b"}),
        ("/api/entities", {"kind": "planet"}),
        ("/api/entities", {"limit": 0}),
        ("/api/entities", {"limit": 501}),
        ("/api/entities", {"offset": -1}),
        ("/api/entities/%E2%80%8B", {}),
        ("/api/entities/%20caroline", {}),
    ],
)
def test_bad_input_to_the_entity_api_is_a_4xx(
    api: TestClient, keys: Any, tenant: str, path: str, params: dict[str, Any]
) -> None:
    response = api.get(path, params=params, headers={"Authorization": f"Bearer {keys(tenant).key}"})
    assert response.status_code == 422, response.text


def test_a_name_with_no_letter_or_digit_names_no_entity(api: TestClient, keys: Any, tenant: str) -> None:
    post_turns(api, tenant, [0])
    own = {"Authorization": f"Bearer {keys(tenant).key}"}
    assert api.get("/api/entities", params={"prefix": "!!!"}, headers=own).json() == {
        "entities": [],
        "next_offset": None,
    }
    assert api.get("/api/entities", params={"q": "--"}, headers=own).json()["entities"] == []
    assert api.get("/api/entities/---", headers=own).status_code == 404


def test_the_cli_shows_entities_and_backfills_the_graph(
    api: TestClient, neo4j_driver: neo4j.Driver, tenant: str
) -> None:
    post_turns(api, tenant, [0, 1, 2])
    # Given the graph of these turns wiped, as in a store written before it existed
    cypher(
        neo4j_driver,
        """
        MATCH (m:Memory {user_id: $u})
        OPTIONAL MATCH (m)-[r:NEXT|MENTIONS]-() DELETE r
        WITH DISTINCT m OPTIONAL MATCH (s:Session)-[h:HAS_TURN]->(m) DELETE h, s
        """,
        u=tenant,
    )
    cypher(neo4j_driver, "MATCH (e:Entity {user_id: $u}) DETACH DELETE e", u=tenant)
    # and without the graph's uniqueness rules, which a store of the earlier version lacks
    for rule in ("entity_id", "session_id"):
        cypher(neo4j_driver, f"DROP CONSTRAINT {rule} IF EXISTS")

    def engram(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([ENGRAM, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)

    assert engram("entities", "show", "Caroline", "--user", tenant).returncode == 1

    # When the backfill runs (twice: it is idempotent)
    for _ in range(2):
        done = engram("graph", "backfill", "--user", tenant)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"memories": 3}

    # Then the backfill made the uniqueness rules before its first entity (two writers could
    # otherwise each make one Entity of an id, and the rule could never be made after)
    rules = {row["name"] for row in cypher(neo4j_driver, "SHOW CONSTRAINTS YIELD name RETURN name")}
    assert {"entity_id", "session_id"} <= rules
    # And the entities are back, and the CLI lists and shows them
    listed = engram("entities", "list", "--user", tenant, "--json")
    assert listed.returncode == 0, listed.stderr
    assert {e["key"] for e in json.loads(listed.stdout)["entities"]} >= {"caroline", "melanie", "lgbtq"}
    shown = engram("entities", "show", "caroline", "--user", tenant)
    assert shown.returncode == 0 and "3 memories" in shown.stdout
    assert engram("entities", "list", "--user", tenant, "--prefix", "!!!").returncode == 2
    chain = cypher(
        neo4j_driver,
        "MATCH (a:Memory {user_id: $u})-[:NEXT]->(b) RETURN a.document_id AS a, b.document_id AS b ORDER BY a",
        u=tenant,
    )
    assert chain == [{"a": "turn-0", "b": "turn-1"}, {"a": "turn-1", "b": "turn-2"}]


def test_graph_sources_bring_turns_the_query_names_or_that_sit_beside_a_hit(
    api: TestClient, settings: Settings, tenant: str
) -> None:
    post_turns(api, tenant, [0, 1, 2, 3, 4])
    text = "what does caroline want to do at stanford"
    store = Neo4jStore(settings)
    embedder = Container(settings).embedder
    query = Query(
        text=text,
        vector=embedder.embed_query(text).tolist(),
        user_id=tenant,
        filters=SearchFilters(),
        top_k=1,
        pool=1,
        terms=query_terms(text),
    )
    graph = settings.model_copy(update={"search_entity_expansion": True, "search_session_evidence": True})
    try:
        # Switched off (the default), only the indexes' candidates (one each for a pool of one)
        base = {c.hit.id for c in Searcher(store, embedder, settings).candidates(query, "engram")}
        # Switched on, the turns naming the query's rarer entities and those beside the first hits
        found = {c.hit.id for c in Searcher(store, embedder, graph).candidates(query, "engram")}
        baseline = {c.hit.id for c in Searcher(store, embedder, graph).candidates(query, "vector")}
    finally:
        store.close()

    assert memory_id(tenant, "turn-4", 0) in found  # names both of the query's entities
    assert memory_id(tenant, "turn-3", 0) in found  # the turn before it
    assert base < found
    assert len(baseline) == 1, "the baselines never read the graph"
