"""Schema made by several processes at the same moment, against the real Neo4j: the write worker's
threads and a first search all bootstrap a new store at once."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, LiteralString

import neo4j
import pytest

from shared.settings import Settings
from shared.stores.neo4j import Neo4jStore, schema_queries
from shared.stores.neo4j.schema import held_index_options
from shared.stores.neo4j.search_queries import FULLTEXT_INDEX
from tests.integration.support import DIMENSION, MODEL, bootstrap_over_earlier_fulltext_index, cypher

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


def test_a_schema_made_again_logs_no_notice_of_each_rule_already_there(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a store whose schema is made
    first = Neo4jStore(settings)
    first.bootstrap(MODEL, DIMENSION)
    first.close()
    # When a process starting (a worker's, a search's) makes it again, as each does
    again = Neo4jStore(settings)
    try:
        with caplog.at_level(logging.DEBUG, logger="neo4j.notifications"):
            again.bootstrap(MODEL, DIMENSION)
    finally:
        again.close()
    # Then its log holds no "already exists" notice of the server's, one 600-character line per
    # rule (about fifty a query worker's start)
    notices = [r.getMessage()[:120] for r in caplog.records if r.name == "neo4j.notifications"]
    assert notices == []


def _bootstrap(store: Neo4jStore) -> str:
    try:
        store.bootstrap(MODEL, DIMENSION)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "ok"


def test_a_store_of_an_earlier_version_gets_the_english_fulltext_index(
    settings: Settings, neo4j_driver: neo4j.Driver
) -> None:
    # Given a store whose fulltext index is an earlier version's (the standard analyser, same
    # properties), when a process of this version makes the schema
    bootstrap_over_earlier_fulltext_index(
        settings,
        neo4j_driver,
        "CREATE FULLTEXT INDEX memory_content_tenant FOR (m:Memory) ON EACH [m.content, m.user_id]",
    )

    # Then the English index is online in its place (Neo4j would not make it beside the old one)
    rows = cypher(
        neo4j_driver, "SHOW FULLTEXT INDEXES YIELD name, state, options RETURN name, state, options"
    )
    assert [(r["name"], r["state"]) for r in rows] == [(FULLTEXT_INDEX, "ONLINE")]
    assert rows[0]["options"]["indexConfig"]["fulltext.analyzer"] == "english"


def test_the_vector_index_is_made_with_the_settings_options_and_an_older_one_is_kept(
    settings: Settings, neo4j_driver: neo4j.Driver, caplog: pytest.LogCaptureFixture
) -> None:
    def held() -> dict[str, object]:
        rows = cypher(
            neo4j_driver,
            "SHOW VECTOR INDEXES YIELD name, options, properties WHERE name = 'memory_embedding' "
            "RETURN options, properties",
        )
        return held_index_options(rows[0]["options"]["indexConfig"], rows[0]["properties"])

    # (2026.02 and later name quantization by its type, SCALAR when asked for, and hold the tenant)
    probe = Neo4jStore(settings)
    try:
        with_tenant = probe.filters_in_vector_index()
    finally:
        probe.close()
    quantized: dict[str, object] = (
        {"vector.quantization.type": "SCALAR", "with": ["user_id"]}
        if with_tenant
        else {"vector.quantization.enabled": True, "with": []}
    )
    unquantized: dict[str, object] = (
        {"vector.quantization.type": "NONE", "with": ["user_id"]}
        if with_tenant
        else {"vector.quantization.enabled": False, "with": []}
    )

    # Given a store whose vector index is gone
    cypher(neo4j_driver, "DROP INDEX memory_embedding IF EXISTS")
    wanted = settings.model_copy(
        update={"neo4j_vector_m": 24, "neo4j_vector_ef_construction": 150, "neo4j_vector_quantization": True}
    )
    # When a process makes the schema
    _bootstrapped(wanted)
    # Then the index has the settings' HNSW options
    assert held() == {"vector.hnsw.m": 24, "vector.hnsw.ef_construction": 150, **quantized}

    # When a process whose settings ask others (the defaults) meets that index
    later = Neo4jStore(settings)
    try:
        with caplog.at_level("WARNING", logger="shared.stores.neo4j.schema"):
            later.bootstrap(MODEL, DIMENSION)
            later.forget_schema()
            later.bootstrap(MODEL, DIMENSION)
        # Then the index is kept as it is (making it again would make vector searches wait) and
        # the difference is named once, with what to do
        assert held()["vector.hnsw.m"] == 24
        named = [r.getMessage() for r in caplog.records if "memory_embedding was made with" in r.getMessage()]
        assert len(named) == 1 and "DROP INDEX memory_embedding" in named[0], named
    finally:
        later.close()

    # And once it is dropped, the next bootstrap makes it with the defaults: no quantization, a
    # beam of 200 (recall@10 at the search's k 0.963 against 0.938 for Neo4j's own, on 62.7k vectors)
    cypher(neo4j_driver, "DROP INDEX memory_embedding IF EXISTS")
    _bootstrapped(settings)
    assert held() == {"vector.hnsw.m": 16, "vector.hnsw.ef_construction": 200, **unquantized}


def _bootstrapped(settings: Settings) -> None:
    store = Neo4jStore(settings)
    try:
        store.bootstrap(MODEL, DIMENSION)
    finally:
        store.close()


class _FoldCounted(Neo4jStore):
    """The real store, counting how many of its threads fold twin claims at the same moment."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.running = self.most = 0
        self._counting = threading.Lock()

    def _write(self, query: LiteralString, **params: Any) -> list[dict[str, Any]]:
        if query != schema_queries.FOLD_TWIN_CLAIMS:
            return super()._write(query, **params)
        with self._counting:
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            return super()._write(query, **params)
        finally:
            with self._counting:
                self.running -= 1


def test_the_claims_guard_runs_in_one_thread_at_a_time(settings: Settings) -> None:
    # Given one store object shared by the write worker's threads: a write thread meeting a wiped
    # primary again and again (the schema made anew each time) while a reconcile thread records
    # its passes (each a claim write, guarded)
    store = _FoldCounted(settings)
    done = threading.Event()

    def writer() -> None:
        try:
            for _ in range(10):
                store.forget_schema()
                store.ensure_schema(MODEL, DIMENSION)
        finally:
            done.set()

    def reconciler() -> None:
        while not done.is_set():
            store.record_reconcile("{}", datetime.now(UTC))

    # When both run at once
    try:
        with ThreadPoolExecutor(2) as pool:
            running = [pool.submit(writer), pool.submit(reconciler)]
            for future in running:
                future.result()
    finally:
        store.close()

    # Then the twins' fold (DETACH DELETEs two at once could deadlock on) never ran twice at once
    assert store.most == 1
