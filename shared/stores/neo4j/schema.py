"""The store's schema: constraints and indexes made on every database the store meets, the
claim nodes they guard, and the embedding model the store holds.

The constraints come first: two processes claiming a new store at once (a first search and a
first write) would otherwise each MERGE a claim node, and with two of them the uniqueness
constraint can never be made, so every later write fails.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping
from typing import Any, LiteralString

from shared.errors import ConfigurationError, GraphStoreRejected, TransientError
from shared.search.text import tenant_token
from shared.stores.base import ModelClaim
from shared.stores.neo4j import graph_queries as gq
from shared.stores.neo4j import reembed_queries as mq
from shared.stores.neo4j import restore_queries as iq
from shared.stores.neo4j import schema_queries as q
from shared.stores.neo4j import search_queries as sq
from shared.stores.neo4j.connection import Neo4jConnection, Row

log = logging.getLogger(__name__)

# How long a write or a search that made the vector index waits for it: an empty store's is
# online at once; one of many vectors is built meanwhile (about a minute at 62.7k here) while the
# backup serves searches (search.py).
NEW_INDEX_WAIT_S = 2.0

# What Neo4j says when a uniqueness constraint cannot be made over nodes that break it.
CONSTRAINT_BLOCKED = "Neo.DatabaseError.Schema.ConstraintCreationFailed"

SCHEMA_MADE_MEANWHILE = frozenset(
    {
        "Neo.ClientError.Schema.EquivalentSchemaRuleAlreadyExists",
        "Neo.ClientError.Schema.IndexAlreadyExists",
        "Neo.ClientError.Schema.ConstraintAlreadyExists",
    }
)


def schema_names() -> tuple[str, ...]:
    """Every constraint and index the store's schema makes, by name (the vector index too)."""
    made = re.compile(r"^CREATE (?:CONSTRAINT|INDEX|FULLTEXT INDEX) (\w+) IF NOT EXISTS")
    statements = (*q.SCHEMA_STATEMENTS, *sq.FULLTEXT_SCHEMA, *gq.GRAPH_SCHEMA)
    names = [found.group(1) for found in map(made.match, statements) if found is not None]
    return (*names, q.VECTOR_INDEX)


def claim_of(row: Mapping[str, Any]) -> ModelClaim:
    """The store's model and its migration, as an ``EngramSchema`` read gives them."""

    def pair(model: Any, dimension: Any) -> tuple[str, int] | None:
        return (str(model), int(dimension)) if model is not None and dimension is not None else None

    return ModelClaim(
        model=pair(row.get("model"), row.get("dimension")),
        phase=row.get("state"),
        source=pair(row.get("source_model"), row.get("source_dim")),
        target=pair(row.get("target_model"), row.get("target_dim")),
    )


class SchemaOps(Neo4jConnection):
    def bootstrap(self, model: str, dimension: int, timeout_s: int = 300, *, wait: bool = True) -> None:
        """Constraints, range indexes, the fulltext index and the vector index sized to the model.

        Refuses to run against a store that holds another model's vectors: that is a migration.
        The constraints come first: two processes claiming a new store at once (a first search and
        a first write) would otherwise each MERGE a claim node, and with two of them the uniqueness
        constraint can never be made, so every later write fails. One thread at a time (a restore
        calls it beside the write threads' ``ensure_schema``). ``wait``: until every index is
        online (a restore, a migration); otherwise as ``ensure_vector_index`` says.
        """
        with self._schema_lock:
            self._claims_guarded = False  # made again: this may be another database than before
            self._server_version = None  # and another server (an upgrade in place)
            self._guard_claims()
            self._give_tenant_tokens()
            for statement in (*sq.FULLTEXT_SCHEMA, *gq.GRAPH_SCHEMA):
                self._schema(statement)
            self._graph_schema_ready = True
            self._schema_store_id = self._claim(iq.ENSURE_IDENTITY)[0]["store_id"]
            self._schema_checked_at = time.monotonic()
            claimed = self._claim(q.CLAIM_EMBEDDING_MODEL, model=model, dimension=dimension)[0]
            if (claimed["model"], claimed["dimension"]) != (model, dimension):
                refusal = self.model_claim().refuse_write(model, dimension)
                if refusal is not None:
                    raise refusal
            self.ensure_vector_index(dimension, timeout_s, wait=wait)

    def ensure_vector_index(self, dimension: int, timeout_s: int = 300, *, wait: bool = True) -> None:
        """The vector index on ``Memory.embedding``, sized to ``dimension``, online. Made with the
        settings' HNSW options, and on a server that filters inside the index (2026.02+) with the
        tenant in it; an index made otherwise is kept (while it is made again, about a minute at
        62.7k here, searches that need it are the backup's) and named once in the log. Without
        ``wait``, an index made now is waited for at most ``NEW_INDEX_WAIT_S`` and one being built
        not at all: a write or a search that meets a dropped index goes on while it is built."""
        existing = self._read(q.SHOW_VECTOR_INDEX, name=q.VECTOR_INDEX)
        if existing and existing[0]["dimension"] != dimension:
            raise ConfigurationError(
                f"vector index {q.VECTOR_INDEX} has {existing[0]['dimension']} dimensions, "
                f"the model has {dimension}"
            )
        s = self._settings
        with_tenant = self.filters_in_vector_index()
        wanted = vector_index_options(
            s.neo4j_vector_m, s.neo4j_vector_ef_construction, s.neo4j_vector_quantization, with_tenant
        )
        if not existing:
            statement = q.CREATE_VECTOR_INDEX_WITH_TENANT if with_tenant else q.CREATE_VECTOR_INDEX
            options = ", ".join(
                f"`{key}`: {json.dumps(value)}" for key, value in wanted.items() if key != WITH
            )
            self._schema(statement.format(dimension=int(dimension), options=options))
        else:
            held = held_index_options(existing[0]["config"], existing[0]["properties"])
            if held != wanted and held != self._named_index_options:
                self._named_index_options = held
                log.warning(
                    "vector index %s was made with %s, the settings ask %s: it is kept; to make it "
                    "again, drop it (DROP INDEX %s) when vector searches can wait for it "
                    "(docs/operations/known-limits.md)",
                    q.VECTOR_INDEX,
                    held,
                    wanted,
                    q.VECTOR_INDEX,
                )
        if wait:
            self._write(q.AWAIT_INDEXES, timeout_s=timeout_s)
        elif not existing:
            self._await_new_indexes(NEW_INDEX_WAIT_S)
        self._search_index_rows = None  # this process's searches read the index it made at once

    def _give_tenant_tokens(self) -> None:
        """Memories written before the fulltext index held the tenant's token get theirs, before
        that index is made (one population, not two): without it a Memory is not found by its
        words. Only while that index is not made (a store of an earlier version, or one whose
        index was dropped): every write since gives its Memories their token, and the look for
        those without one is a scan of every Memory (15-50 ms at 100k here). 100k Memories got
        theirs in 0.8 s. Two processes at once set the same values; one that loses a deadlock to
        the other tries again."""
        if self._read(sq.SEARCH_INDEXES, names=[sq.FULLTEXT_INDEX]):  # made, in any state
            return
        tenants = [row["user_id"] for row in self._read(sq.TENANTS_WITHOUT_TOKENS)]
        rows = [{"user_id": t, "token": tenant_token(t)} for t in tenants if isinstance(t, str)]
        if not rows:
            return
        log.info("the Memories of %d tenants get their tenant token (%s)", len(rows), sq.FULLTEXT_INDEX)
        for attempt in range(3):
            try:
                self._autocommit(sq.SET_TENANT_TOKENS, tenants=rows)
                return
            except TransientError:
                if attempt == 2:
                    raise

    def _await_new_indexes(self, timeout_s: float) -> None:
        """Waits up to ``timeout_s`` for every index to be online; names those still built."""
        deadline = time.monotonic() + timeout_s
        while building := self._read(q.INDEXES_NOT_ONLINE):
            if time.monotonic() >= deadline:
                named = (f"{r['name']} {r['state'].lower()} {r['percent'] or 0:.0f}%" for r in building)
                log.warning(
                    "indexes being built: %s; searches are served by the backup until they are online",
                    ", ".join(named),
                )
                return
            time.sleep(0.05)

    def _guard_claims(self) -> None:
        """The constraints (one ``EngramSchema`` node per id among them), made before this store
        object MERGEs any claim node: a restore's checkpoint, the identity or a migration written
        to a new store before any bootstrap would otherwise leave twins two processes made at once,
        and with twins the constraint can never be made. Twins an older version left are folded
        into the newest first, which heals a store they wedged."""
        if self._claims_guarded:
            return
        for attempt in range(3):
            self._write(q.FOLD_TWIN_CLAIMS)
            try:
                for statement in q.SCHEMA_STATEMENTS:
                    self._schema(statement)
                break
            except TransientError as exc:
                # Twins made between the fold and the constraint, by a process without this guard.
                if CONSTRAINT_BLOCKED not in str(exc) or attempt == 2:
                    raise
        self._claims_guarded = True
        self._claims_checked_at = time.monotonic()

    def _claim(self, query: LiteralString, **params: Any) -> list[Row]:
        """A write that MERGEs an ``EngramSchema`` node, once its constraint is made (looked at
        again once per ``neo4j_schema_check_s``: the database may have been wiped meanwhile). The
        guard runs in one thread at a time: two folding the same twins could deadlock."""
        with self._schema_lock:
            if self._claims_guarded and time.monotonic() - self._claims_checked_at >= self._schema_check_s:
                self._claims_checked_at = time.monotonic()
                names = {row["name"] for row in self._read(q.SHOW_CONSTRAINT_NAMES)}
                self._claims_guarded = "engram_schema_id" in names
            self._guard_claims()
        return self._write(query, **params)

    def _schema(self, statement: LiteralString) -> None:
        """A schema statement. Processes making a new store's schema at the same moment (the write
        worker's threads, a first search) race: Neo4j refuses the rule a loser creates although
        ``IF NOT EXISTS``, as one like it was made meanwhile. That rule is the one wanted."""
        try:
            self._write(statement)
        except GraphStoreRejected as exc:
            if getattr(exc.__cause__, "code", None) not in SCHEMA_MADE_MEANWHILE:
                raise

    def model_claim(self) -> ModelClaim:
        """The store's model and the migration, as writers and searches check them."""
        rows = self._read(mq.MODEL_STATE)
        return claim_of(rows[0]) if rows else ModelClaim(None)

    def check_search_model(self, model: str, dimension: int) -> None:
        """Refuses (503) a search whose query vector is not of the model the store holds now."""
        refusal = self.model_claim().refuse_search(model, dimension)
        if refusal is not None:
            raise refusal
        self.ensure_schema(model, dimension)

    def stored_model(self) -> tuple[str, int] | None:
        """The model whose vectors the store holds, once a writer has claimed it."""
        rows = self._read(q.STORED_MODEL)
        return (rows[0]["model"], int(rows[0]["dimension"])) if rows else None

    def missing_schema(self, populating: bool = False) -> list[str]:
        """The constraints and indexes of the schema the database lacks (or holds not online;
        with ``populating``, not being built either)."""
        present = {row["name"] for row in self._read(q.SHOW_CONSTRAINT_NAMES)}
        names = q.SHOW_INDEX_NAMES_MADE if populating else q.SHOW_INDEX_NAMES
        present |= {row["name"] for row in self._read(names)}
        return [name for name in schema_names() if name not in present]

    def _schema_gone(self) -> bool:
        """Whether the database is not the one this object made the schema on (another store id:
        wiped, replaced, restored) or lost part of it. Looked at once per ``neo4j_schema_check_s``."""
        if not self._schema_ready or time.monotonic() - self._schema_checked_at < self._schema_check_s:
            return False
        self._schema_checked_at = time.monotonic()
        store_id = self._read(q.STORE_ID)[0]["store_id"]
        if store_id != self._schema_store_id:
            return True
        # An index being built (dropped and made again) is not gone: making the schema again
        # would change nothing but cost every process a bootstrap each check until it is online.
        return bool(self.missing_schema(populating=True))

    def forget_schema(self) -> None:
        """The next write or search makes the schema again (a new database was met)."""
        self._schema_ready.clear()
        self._claims_guarded = False
        self._graph_schema_ready = False

    def ensure_schema(self, model: str, dimension: int) -> None:
        """The schema for this model, made on every database this object meets: once, and again
        when the store id changes or a constraint or index is found missing (a wiped primary
        under running workers)."""
        with self._schema_lock:
            if self._schema_gone():
                self.forget_schema()
            if (model, dimension) not in self._schema_ready:
                self.bootstrap(model, dimension, wait=False)
                self._write(q.REGISTER_MODEL, model=model, dimension=dimension)
                self._schema_ready.add((model, dimension))


# The properties an index holds beside the vector, as a key of its options here.
WITH = "with"


def vector_index_options(
    m: int, ef_construction: int, quantization: bool, with_tenant: bool
) -> dict[str, Any]:
    """The HNSW part of the vector index's config, keyed as ``SHOW INDEXES`` names it, and the
    properties it holds beside the vector (``WITH``). A server that filters inside the index
    (2026.02+) names quantization by its type: SCALAR when asked for (its BINARY default finds
    0.61 of a small tenant's top 10 where SCALAR finds 0.99: docs/bench/neo4j-filtering.md)."""
    options: dict[str, Any] = {"vector.hnsw.m": int(m), "vector.hnsw.ef_construction": int(ef_construction)}
    if with_tenant:
        options["vector.quantization.type"] = "SCALAR" if quantization else "NONE"
    else:
        options["vector.quantization.enabled"] = bool(quantization)
    options[WITH] = ["user_id"] if with_tenant else []
    return options


def held_index_options(config: Mapping[str, Any], properties: list[str]) -> dict[str, Any]:
    """An index's HNSW config and the properties it holds beside the vector, as
    ``vector_index_options`` keys them (2026.x shows quantization as ``vector.quantization.type``,
    5.26 as ``.enabled``)."""
    held = {key: config.get(key) for key in ("vector.hnsw.m", "vector.hnsw.ef_construction")}
    for key in ("vector.quantization.type", "vector.quantization.enabled"):
        if key in config:
            held[key] = config[key]
    held[WITH] = [name for name in properties if name != "embedding"]
    return held
