"""Schema made by several processes at the same moment, against the real Neo4j: the write worker's
threads and a first search all bootstrap a new store at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import neo4j
import pytest

from shared.settings import Settings
from shared.stores.neo4j import Neo4jStore
from tests.integration.support import DIMENSION, MODEL, cypher

pytestmark = pytest.mark.integration


def test_stores_bootstrapping_at_once_all_succeed(settings: Settings, neo4j_driver: neo4j.Driver) -> None:
    # Given a store whose vector index is gone (a new store, as far as the index goes)
    stores = [Neo4jStore(settings) for _ in range(8)]
    cypher(neo4j_driver, "DROP INDEX memory_embedding IF EXISTS")
    try:
        # When eight of them make the schema at the same moment
        with ThreadPoolExecutor(len(stores)) as pool:
            outcomes = list(pool.map(lambda s: _bootstrap(s), stores))
        # Then none fails for good (a rule another made meanwhile is the rule it wanted); a
        # deadlock between them is transient, retried by the task's policy, and the retry succeeds
        assert all(o == "ok" or o.startswith("TransientError") for o in outcomes), outcomes
        with ThreadPoolExecutor(len(stores)) as pool:
            assert set(
                pool.map(
                    lambda s: _bootstrap(s), [s for s, o in zip(stores, outcomes, strict=True) if o != "ok"]
                )
            ) <= {"ok"}
    finally:
        stores[0].bootstrap(MODEL, DIMENSION)
        for store in stores:
            store.close()
    assert cypher(neo4j_driver, "SHOW VECTOR INDEXES YIELD name WHERE name = 'memory_embedding' RETURN name")


def _bootstrap(store: Neo4jStore) -> str:
    try:
        store.bootstrap(MODEL, DIMENSION)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "ok"
