"""The graph derived in the store's write path, against the real Neo4j: sessions and turn order
(out of order, concurrent batches, positions, updates, deletes), entities and relations (updates,
deletes), the backfill, and neighbours along turns."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import neo4j
import pytest

from shared.graph.entities import BuiltinExtractor, NoExtractor
from shared.ids import content_hash, document_key
from shared.ids import memory_id as chunk_id
from shared.models import ChunkRecord, DocumentIn, SearchFilters, StagedDocument
from shared.settings import Settings
from shared.stores.base import DocumentWrite
from shared.stores.neo4j import Neo4jStore
from shared.stores.neo4j.graph import GraphWriter
from tests.integration.support import DIMENSION, MODEL, cypher

pytestmark = pytest.mark.integration

T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


@pytest.fixture(scope="module")
def store(settings: Settings) -> Iterator[Neo4jStore]:
    made = Neo4jStore(settings)
    made.ensure_schema(MODEL, DIMENSION)
    yield made
    made.close()


def turn(
    user_id: str,
    document_id: str,
    text: str,
    *,
    session: str | None = "s1",
    second: int = 0,
    version: int = 1,
    position: int | None = None,
    chunks: list[str] | None = None,
) -> DocumentWrite:
    parts = chunks or [text]
    document = DocumentIn(
        user_id=user_id,
        id=document_id,
        text=text,
        session_id=session,
        memory_type="turn",
        created_at=T0 + timedelta(seconds=second),
        position=position,
    )
    staged = StagedDocument(
        document=document,
        key=document_key(user_id, document_id),
        version=version,
        content_hash=content_hash(text),
        received_at=T0,
        chunks=[
            ChunkRecord(
                id=chunk_id(user_id, document_id, index),
                chunk_index=index,
                content=part,
                content_hash=content_hash(part),
                token_count=len(part.split()),
            )
            for index, part in enumerate(parts)
        ],
    )
    rng = random.Random(f"{document_id}{version}")
    vectors = [[rng.uniform(-1, 1) for _ in range(DIMENSION)] for _ in parts]
    return DocumentWrite(staged, vectors, MODEL)


def chain(driver: neo4j.Driver, user_id: str, session: str) -> list[str]:
    """The session's turns as their NEXT chain reads, from its first turn (the content)."""
    rows = cypher(
        driver,
        """
        MATCH (s:Session {user_id: $user_id, session_id: $session})-[:HAS_TURN]->(first:Memory)
        WHERE NOT (first)<-[:NEXT]-(:Memory)
        MATCH p = (first)-[:NEXT*0..]->(last:Memory) WHERE NOT (last)-[:NEXT]->()
        RETURN [m IN nodes(p) | m.content] AS contents
        """,
        user_id=user_id,
        session=session,
    )
    assert len(rows) == 1, f"one chain with one start and one end, got {rows}"
    turns = cypher(
        driver,
        "MATCH (:Session {user_id: $user_id, session_id: $session})-[:HAS_TURN]->(m) RETURN count(m) AS n",
        user_id=user_id,
        session=session,
    )[0]["n"]
    contents: list[str] = rows[0]["contents"]
    assert len(contents) == turns, "every turn of the session is on the chain"
    return contents


def sessions(driver: neo4j.Driver, user_id: str) -> list[str]:
    rows = cypher(driver, "MATCH (s:Session {user_id: $u}) RETURN s.session_id AS s ORDER BY s", u=user_id)
    return [row["s"] for row in rows]


def entities(driver: neo4j.Driver, user_id: str) -> dict[str, int]:
    rows = cypher(
        driver,
        "MATCH (e:Entity {user_id: $u}) RETURN e.key AS key, COUNT { (e)<-[:MENTIONS]-() } AS n",
        u=user_id,
    )
    return {row["key"]: row["n"] for row in rows}


def related(driver: neo4j.Driver, user_id: str) -> dict[tuple[str, str], list[str]]:
    rows = cypher(
        driver,
        """
        MATCH (a:Entity {user_id: $u})-[r:RELATED]->(b:Entity)
        RETURN a.key AS a, b.key AS b, r.memory_ids AS ids, r.count AS n
        """,
        u=user_id,
    )
    for row in rows:
        assert row["n"] == len(row["ids"])
    return {tuple(sorted((row["a"], row["b"]))): sorted(row["ids"]) for row in rows}  # type: ignore[misc]


def test_turns_written_out_of_order_in_separate_writes_end_in_order(
    store: Neo4jStore, neo4j_driver: neo4j.Driver, tenant: str
) -> None:
    # Given six turns of one session, written one write at a time in a shuffled order
    order = [3, 0, 5, 1, 4, 2]
    for n in order:
        store.write_documents([turn(tenant, f"t{n}", f"turn {n}", second=n)])

    # Then the session chains them by created_at, one Session node for the tenant and session
    assert chain(neo4j_driver, tenant, "s1") == [f"turn {n}" for n in range(6)]
    assert sessions(neo4j_driver, tenant) == ["s1"]


def test_concurrent_batches_of_one_session_end_in_order(
    settings: Settings, store: Neo4jStore, neo4j_driver: neo4j.Driver, tenant: str
) -> None:
    # Given 24 turns written as 6 batches of 4 by 6 writers at once, turns of each batch far apart
    turns = list(range(24))
    batches = [turns[i::6] for i in range(6)]
    stores = [Neo4jStore(settings) for _ in batches]
    errors: list[BaseException] = []

    def write(writer: Neo4jStore, batch: list[int]) -> None:
        try:
            writer.write_documents([turn(tenant, f"c{n}", f"turn {n}", second=n) for n in batch])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=pair) for pair in zip(stores, batches, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for writer in stores:
        writer.close()

    # Then every write went in and the chain is the turns in order
    assert errors == []
    assert chain(neo4j_driver, tenant, "s1") == [f"turn {n}" for n in turns]


def test_an_explicit_position_orders_turns_before_created_at(
    store: Neo4jStore, neo4j_driver: neo4j.Driver, tenant: str
) -> None:
    # Given turns whose positions disagree with their times (posted late, or clocks apart)
    store.write_documents(
        [
            turn(tenant, "a", "first", second=30, position=0),
            turn(tenant, "b", "second", second=10, position=1),
            turn(tenant, "c", "third", second=20, position=2),
        ]
    )

    # Then the positions order them
    assert chain(neo4j_driver, tenant, "s1") == ["first", "second", "third"]


def test_chunks_of_a_turn_stay_together_in_the_session_chain(
    store: Neo4jStore, neo4j_driver: neo4j.Driver, tenant: str
) -> None:
    # Given a long turn of two chunks between two short ones, the later one written first
    store.write_documents([turn(tenant, "z", "last", second=9)])
    store.write_documents([turn(tenant, "a", "first", second=1)])
    store.write_documents([turn(tenant, "m", "middle one middle two", second=5, chunks=["mid 1", "mid 2"])])

    # Then the chain runs through the turn's chunks in their order
    assert chain(neo4j_driver, tenant, "s1") == ["first", "mid 1", "mid 2", "last"]


def test_deletes_and_updates_keep_the_chain_true(
    store: Neo4jStore, neo4j_driver: neo4j.Driver, tenant: str
) -> None:
    store.write_documents([turn(tenant, f"t{n}", f"turn {n}", second=n) for n in range(5)])

    # When a middle turn is deleted (by id), the turns either side are linked
    store.delete_memories(tenant, SearchFilters(), [chunk_id(tenant, "t2", 0)], version=5)
    assert chain(neo4j_driver, tenant, "s1") == ["turn 0", "turn 1", "turn 3", "turn 4"]

    # When a turn's document moves to another session (a newer version), each chain is true
    store.write_documents([turn(tenant, "t1", "turn 1", session="s2", second=1, version=6)])
    assert chain(neo4j_driver, tenant, "s1") == ["turn 0", "turn 3", "turn 4"]
    assert chain(neo4j_driver, tenant, "s2") == ["turn 1"]

    # When a turn's time changes, it moves along the chain
    store.write_documents([turn(tenant, "t0", "turn 0", second=99, version=7)])
    assert chain(neo4j_driver, tenant, "s1") == ["turn 3", "turn 4", "turn 0"]

    # When a turn leaves every session, its Session goes once empty
    store.write_documents([turn(tenant, "t1", "turn 1", session=None, second=1, version=8)])
    assert sessions(neo4j_driver, tenant) == ["s1"]
    no_next = cypher(
        neo4j_driver,
        "MATCH (m:Memory {id: $id}) RETURN COUNT { (m)-[:NEXT]-() } AS n",
        id=chunk_id(tenant, "t1", 0),
    )
    assert no_next == [{"n": 0}]

    # When documents are deleted, the rest stays chained; when all are, the Session is gone
    store.delete_documents([document_key(tenant, "t4")], version=9)
    assert chain(neo4j_driver, tenant, "s1") == ["turn 3", "turn 0"]
    store.delete_memories(tenant, SearchFilters(session_id="s1"), None, version=10)
    assert sessions(neo4j_driver, tenant) == []


def test_entities_are_one_per_tenant_and_name_with_their_relations(
    store: Neo4jStore, neo4j_driver: neo4j.Driver, tenant: str
) -> None:
    # Given turns naming people, a place and a date, in two tenants
    store.write_documents(
        [
            turn(tenant, "a", "Caroline: I went to the LGBTQ support group in Boston yesterday.", second=1),
            turn(tenant, "b", "Melanie: That's great, Caroline! Boston is lovely on 8 May, 2023.", second=2),
            turn(tenant, "c", "Caroline: Thanks Melanie.", second=3),
        ]
    )
    other = f"{tenant}-other"
    store.write_documents([turn(other, "a", "Caroline: hello from Boston.", second=1)])

    # Then each name is one Entity per tenant, mentioned by the memories naming it
    found = entities(neo4j_driver, tenant)
    assert found == {"caroline": 3, "melanie": 2, "lgbtq": 1, "boston": 2, "2023-05-08": 1}
    assert entities(neo4j_driver, other) == {"caroline": 1, "boston": 1}
    a, b, c = (chunk_id(tenant, name, 0) for name in "abc")
    pairs = related(neo4j_driver, tenant)
    assert pairs[("boston", "caroline")] == sorted([a, b])
    assert pairs[("caroline", "melanie")] == sorted([b, c])
    aliases = cypher(
        neo4j_driver, "MATCH (e:Entity {user_id: $u, key: 'caroline'}) RETURN e.aliases AS a", u=tenant
    )
    assert aliases == [{"a": ["Caroline"]}]

    # When a memory is updated, its old entities and evidence go, and an entity no memory names
    store.write_documents([turn(tenant, "a", "Caroline: I went to Paris.", second=1, version=2)])
    found = entities(neo4j_driver, tenant)
    assert "lgbtq" not in found
    assert found["boston"] == 1
    assert found["paris"] == 1
    pairs = related(neo4j_driver, tenant)
    assert pairs[("boston", "caroline")] == [b]
    assert pairs[("caroline", "paris")] == [a]

    # When memories are deleted, entities and relations left without evidence are gone
    store.delete_documents([document_key(tenant, "b")], version=3)
    found = entities(neo4j_driver, tenant)
    assert "boston" not in found
    assert "2023-05-08" not in found
    assert ("boston", "caroline") not in related(neo4j_driver, tenant)
    store.delete_memories(tenant, SearchFilters(), None, version=4)
    assert entities(neo4j_driver, tenant) == {}
    assert related(neo4j_driver, tenant) == {}
    assert entities(neo4j_driver, other) == {"caroline": 1, "boston": 1}


def relation(driver: neo4j.Driver, user_id: str, a: str, b: str) -> tuple[int, list[str]] | None:
    """The RELATED edge of two entities: its count and its evidence, as stored."""
    rows = cypher(
        driver,
        """
        MATCH (x:Entity {user_id: $u, key: $a})-[r:RELATED]-(y:Entity {user_id: $u, key: $b})
        RETURN r.count AS n, r.memory_ids AS ids
        """,
        u=user_id,
        a=a,
        b=b,
    )
    return (rows[0]["n"], rows[0]["ids"]) if rows else None


def test_a_common_pair_keeps_its_count_and_only_its_newest_evidence(
    store: Neo4jStore, neo4j_driver: neo4j.Driver, tenant: str
) -> None:
    # Given 14 turns naming the same two people, written one after another
    names = [f"t{n:02d}" for n in range(14)]
    for n in names:
        store.write_documents([turn(tenant, n, f"Caroline met Melanie, turn {n}.", second=int(n[1:]))])

    # Then the pair counts all 14, and its evidence is the 10 written last
    count, ids = relation(neo4j_driver, tenant, "caroline", "melanie") or (0, [])
    assert count == 14
    assert ids == [chunk_id(tenant, n, 0) for n in names[4:]]

    # When one named in the evidence and one no longer in it are updated to name nobody
    store.write_documents(
        [turn(tenant, n, "nobody here", second=int(n[1:]), version=2) for n in ("t13", "t00")]
    )

    # Then both stop counting, and the evidence loses the one it held
    count, ids = relation(neo4j_driver, tenant, "caroline", "melanie") or (0, [])
    assert count == 12
    assert ids == [chunk_id(tenant, n, 0) for n in names[4:13]]

    # When every memory naming them is deleted, the relation goes with the last
    store.delete_documents([document_key(tenant, n) for n in names], version=3)
    assert relation(neo4j_driver, tenant, "caroline", "melanie") is None


def test_a_relation_written_before_the_paired_flag_is_unlinked_by_its_evidence(
    store: Neo4jStore, neo4j_driver: neo4j.Driver, tenant: str
) -> None:
    # Given two turns linked as an older version did: MENTIONS without the flag, full evidence
    store.write_documents([turn(tenant, n, f"Caroline met Melanie, turn {n}.") for n in ("a", "b")])
    cypher(
        neo4j_driver,
        "MATCH (:Memory {user_id: $u})-[k:MENTIONS]->() REMOVE k.paired",
        u=tenant,
    )

    # When one of them is deleted
    store.delete_documents([document_key(tenant, "a")], version=2)

    # Then the relation counts the other alone
    assert relation(neo4j_driver, tenant, "caroline", "melanie") == (1, [chunk_id(tenant, "b", 0)])


def test_backfill_derives_the_graph_of_memories_written_without_it(
    settings: Settings, neo4j_driver: neo4j.Driver, tenant: str
) -> None:
    # Given turns written by a store that extracts nothing, and their graph then wiped (as a
    # store written before the graph existed, or restored from Qdrant, would be)
    plain = Neo4jStore(settings, graph=GraphWriter(NoExtractor()))
    plain.write_documents([turn(tenant, f"t{n}", f"Caroline: turn {n} in Rome", second=n) for n in (2, 0, 1)])
    cypher(
        neo4j_driver,
        """
        MATCH (m:Memory {user_id: $u})
        OPTIONAL MATCH (m)-[r:NEXT]-() DELETE r
        WITH DISTINCT m OPTIONAL MATCH (s:Session)-[h:HAS_TURN]->(m) DELETE h, s
        """,
        u=tenant,
    )
    assert sessions(neo4j_driver, tenant) == []
    assert entities(neo4j_driver, tenant) == {}

    # When the graph is derived from the Memories (twice: it is idempotent)
    full = Neo4jStore(settings, graph=GraphWriter(BuiltinExtractor()))
    for _ in range(2):
        ids = full.memory_ids_page(tenant, None, 100)
        assert full.derive_graph(ids) == 3

    # Then sessions, order and entities are there, as a write would have made them
    assert chain(neo4j_driver, tenant, "s1") == [f"Caroline: turn {n} in Rome" for n in range(3)]
    assert entities(neo4j_driver, tenant) == {"caroline": 3, "rome": 3}
    assert len(related(neo4j_driver, tenant)[("caroline", "rome")]) == 3
    plain.close()
    full.close()


def test_neighbours_of_a_turn_are_the_turns_around_it(store: Neo4jStore, tenant: str) -> None:
    # Given five turns of a session, each its own document, written in reverse
    for n in reversed(range(5)):
        store.write_documents([turn(tenant, f"t{n}", f"turn {n}", second=n)])

    # Then a turn's neighbours are the previous and next turns, nearest last and first
    found: dict[str, Any] = store.neighbours(tenant, [chunk_id(tenant, "t2", 0)], 2)
    assert found[chunk_id(tenant, "t2", 0)] == (["turn 0", "turn 1"], ["turn 3", "turn 4"])


def test_the_vector_read_sends_the_first_that_pass_nearest_first(store: Neo4jStore, tenant: str) -> None:
    # Given a dozen memories of the tenant and a dozen of another
    other = f"{tenant}-other"
    store.write_documents(
        [turn(who, f"d{n}", f"note {n}", second=n) for who in (tenant, other) for n in range(12)]
    )
    mine = {
        "user_id": tenant, "project_id": None, "session_id": None, "document_id": None,
        "memory_types": None, "tags": None, "from_date": None, "to_date": None, "statuses": None,
    }  # fmt: skip
    vector = turn(tenant, "d3", "note 3").vectors[0]

    # When the index is asked for more than the store holds, keeping 5 of those passing
    found, kept = store.vector_candidates(vector, 10_000, mine, 5)
    _, every = store.vector_candidates(vector, 10_000, mine, 10_000)

    # Then 5 come back, the tenant's own, nearest first: the first 5 of all that pass (the index
    # gave every tenant's 24, or where it holds the tenant (2026.02+) the tenant's 12)
    ids = [row["memory"]["id"] for row in kept]
    assert found >= (12 if store.filters_in_vector_index() else 24) and len(every) == 12
    assert ids == [row["memory"]["id"] for row in every[:5]] and ids[0] == chunk_id(tenant, "d3", 0)
    assert {row["memory"]["id"] for row in every} == {chunk_id(tenant, f"d{n}", 0) for n in range(12)}
    scores = [row["score"] for row in every]
    assert scores == sorted(scores, reverse=True)


def test_the_search_reads_of_the_graph(store: Neo4jStore, tenant: str) -> None:
    # Given four turns, two naming Rome, one Oslo, and a speaker named in three
    texts = ["Ann: off to Rome", "Bob: Rome is lovely", "Ann: then Oslo", "Ann: home"]
    store.write_documents([turn(tenant, f"t{n}", text, second=n) for n, text in enumerate(texts)])
    ids = [chunk_id(tenant, f"t{n}", 0) for n in range(4)]
    everything = {
        "user_id": tenant, "project_id": None, "session_id": None, "document_id": None,
        "memory_types": None, "tags": None, "from_date": None, "to_date": None, "statuses": None,
    }  # fmt: skip

    # Which of some memories name which entities (those named by at most 2 memories)
    among = store.mentions_among(tenant, ["rome", "oslo", "ann", "nobody"], 2, ids[:2] + ids[3:])
    assert sorted(among) == ["oslo", "rome"]
    assert among["oslo"] == (1, [])
    assert among["rome"][0] == 2 and sorted(among["rome"][1]) == sorted(ids[:2])

    # The NEXT edges among some memories, and the memories beside some
    assert sorted(store.next_among(tenant, ids[:3])) == sorted([(ids[0], ids[1]), (ids[1], ids[2])])
    beside = store.beside_candidates([ids[1]], [0.1] * DIMENSION, everything)
    assert sorted(row["memory"]["id"] for row in beside) == sorted([ids[0], ids[2]])

    # The memories naming entities, those naming more of them first, too common ones left out
    named = store.entity_candidates(["rome", "oslo", "ann"], 2, [0.1] * DIMENSION, 10, everything)
    assert sorted(row["memory"]["id"] for row in named) == sorted(ids[:3])
    assert store.entity_candidates(["ann"], 2, [0.1] * DIMENSION, 10, everything) == []
    assert store.entity_candidates(["rome"], 2, [0.1] * DIMENSION, 10, {**everything, "user_id": "x"}) == []
