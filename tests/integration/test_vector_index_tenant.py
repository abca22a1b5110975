"""The vector index holding the tenant, against the real Neo4j (2026.02 and later): a small
tenant's nearest are found at the pool's k however many of another tenant's memories are nearer,
and an index without the tenant (a 5.26 store upgraded in place) is searched as before until it is
made again, searches changing over by themselves."""

from __future__ import annotations

from collections.abc import Iterator

import neo4j
import numpy as np
import pytest

from shared.models import SearchFilters
from shared.settings import Settings
from shared.stores.neo4j import Neo4jStore
from shared.stores.neo4j.filters import filter_parameters
from tests.integration.support import DIMENSION, MODEL, cypher

pytestmark = pytest.mark.integration

SMALL, BIG, POOL = 8, 400, 8
PLANT = """
UNWIND $rows AS row
CREATE (:Memory {id: row.id, user_id: row.user_id, content: row.id, embedding: row.embedding,
                 created_at: datetime()})
"""
OLD_INDEX = (
    "CREATE VECTOR INDEX memory_embedding IF NOT EXISTS FOR (m:Memory) ON m.embedding OPTIONS "
    "{indexConfig: {`vector.dimensions`: 384, `vector.similarity_function`: 'cosine'}}"
)


@pytest.fixture
def store(settings: Settings, neo4j_driver: neo4j.Driver, tenant: str) -> Iterator[Neo4jStore]:
    store = Neo4jStore(settings, one_try_reads=True)
    store.bootstrap(MODEL, DIMENSION)
    yield store
    cypher(neo4j_driver, "MATCH (m:Memory) WHERE m.user_id STARTS WITH $t DETACH DELETE m", t=tenant)
    cypher(neo4j_driver, "DROP INDEX memory_embedding IF EXISTS")
    store.bootstrap(MODEL, DIMENSION)  # the index as the settings make it, for the tests after
    store.close()


def test_a_small_tenant_is_found_inside_the_index_and_an_old_index_still_answers(
    store: Neo4jStore, neo4j_driver: neo4j.Driver, tenant: str
) -> None:
    # Given a small tenant of 8 memories, and another tenant's 400 all nearer the query
    rng = np.random.default_rng(7)
    query = _unit(rng.normal(size=DIMENSION))
    near = [_unit(query + 0.3 * _unit(rng.normal(size=DIMENSION))) for _ in range(BIG)]
    far = [_unit(query + 3.0 * _unit(rng.normal(size=DIMENSION))) for _ in range(SMALL)]
    rows = [
        {"id": f"{tenant}-big-{i}", "user_id": f"{tenant}-big", "embedding": _floats(v)}
        for i, v in enumerate(near)
    ]
    rows += [{"id": f"{tenant}-{i}", "user_id": tenant, "embedding": _floats(v)} for i, v in enumerate(far)]
    cypher(neo4j_driver, PLANT, rows=rows)
    cypher(neo4j_driver, "CALL db.awaitIndexes(300)")
    filters = filter_parameters(tenant, SearchFilters())
    vector = _floats(query)

    # When the store asks the index for the pool's k of the small tenant
    assert store.filters_in_vector_index(), "the server is 2026.02 or later"
    found, kept = store.vector_candidates(vector, POOL, filters, POOL)

    # Then the index holds the tenant and gives all 8 of its memories, none of the other's
    held = cypher(
        neo4j_driver,
        "SHOW VECTOR INDEXES YIELD name, properties WHERE name = 'memory_embedding' RETURN properties",
    )
    assert held[0]["properties"] == ["embedding", "user_id"]
    assert found == SMALL
    assert {row["memory"]["id"] for row in kept} == {f"{tenant}-{i}" for i in range(SMALL)}

    # When the index is made again without the tenant (a 5.26 store's, upgraded in place) while the
    # store still believes it holds the tenant
    cypher(neo4j_driver, "DROP INDEX memory_embedding IF EXISTS")
    cypher(neo4j_driver, OLD_INDEX)
    cypher(neo4j_driver, "CALL db.awaitIndexes(300)")
    found, kept = store.vector_candidates(vector, POOL, filters, POOL)

    # Then the search still answers, the old way: the index's nearest of every tenant, the small
    # tenant's kept (here none: the other tenant's 400 are all nearer)
    assert found == POOL
    assert kept == []

    # When that index is dropped and the next bootstrap makes it again
    cypher(neo4j_driver, "DROP INDEX memory_embedding IF EXISTS")
    store.forget_schema()
    store.ensure_schema(MODEL, DIMENSION)
    found, kept = store.vector_candidates(vector, POOL, filters, POOL)

    # Then searches change over by themselves: the tenant's own 8 again
    assert found == SMALL
    assert {row["memory"]["id"] for row in kept} == {f"{tenant}-{i}" for i in range(SMALL)}


def _unit(vector: np.ndarray) -> np.ndarray:
    unit: np.ndarray = vector / float(np.linalg.norm(vector))
    return unit


def _floats(vector: np.ndarray) -> list[float]:
    return [float(x) for x in vector]
