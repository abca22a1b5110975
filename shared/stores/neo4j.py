"""Neo4j, the primary store and the source of truth.

Every write is one parameterised ``UNWIND`` per batch inside one transaction, so a batch is either
all in or not at all. Driver errors leave this module as ``shared.errors`` types.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from itertools import pairwise
from typing import Any, LiteralString

import neo4j
from neo4j import GraphDatabase, ManagedTransaction
from neo4j import exceptions as neo4j_errors
from neo4j.graph import Node

from shared.errors import ConfigurationError, GraphStoreRejected, ServiceUnavailable, TransientError
from shared.models import (
    Memory,
    MemoryRecord,
    SearchFilters,
    StagedDocument,
    StoredVector,
    TenantOverview,
    Tombstone,
    VectorSyncCounts,
    utc_now,
)
from shared.settings import Settings
from shared.stores import neo4j_graph_queries as gq
from shared.stores import neo4j_identity_queries as iq
from shared.stores import neo4j_migration_queries as mq
from shared.stores import neo4j_queries as q
from shared.stores import neo4j_search_queries as sq
from shared.stores.base import (
    DocumentWrite,
    EmbeddingTarget,
    MemoryState,
    MigrationPhase,
    MigrationState,
    ModelClaim,
    ReembedRow,
    StoreIdentity,
    SyncHealth,
    SyncRows,
    WriteOutcome,
)
from shared.stores.neo4j_graph import (
    BESIDE_CANDIDATES,
    ENTITY_CANDIDATES,
    MEMORIES_TO_DELETE,
    GraphSource,
    GraphWriter,
)

READ = neo4j.READ_ACCESS
START_HINT = "start it with ./ops/demo, or set ENGRAM_NEO4J_URI"
# What Neo4j says when a uniqueness constraint cannot be made over nodes that break it.
CONSTRAINT_BLOCKED = "Neo.DatabaseError.Schema.ConstraintCreationFailed"

SCHEMA_MADE_MEANWHILE = frozenset(
    {
        "Neo.ClientError.Schema.EquivalentSchemaRuleAlreadyExists",
        "Neo.ClientError.Schema.IndexAlreadyExists",
        "Neo.ClientError.Schema.ConstraintAlreadyExists",
    }
)
Row = dict[str, Any]


def schema_names() -> tuple[str, ...]:
    """Every constraint and index the store's schema makes, by name (the vector index too)."""
    made = re.compile(r"^CREATE (?:CONSTRAINT|INDEX|FULLTEXT INDEX) (\w+) IF NOT EXISTS")
    statements = (*q.SCHEMA_STATEMENTS, *sq.FULLTEXT_SCHEMA, *gq.GRAPH_SCHEMA)
    names = [found.group(1) for found in map(made.match, statements) if found is not None]
    return (*names, q.VECTOR_INDEX)


_PLAIN = frozenset({str, int, float, bool, type(None)})


def _native(value: Any) -> Any:
    """Neo4j temporal values become Python datetimes and nodes maps of their properties, also
    inside maps and lists; a list of numbers (an embedding) is returned as it is, unwalked. Plain
    values first: the abstract isinstance checks cost a search's rows a fifth of its time."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, dict | Node):
        return {key: _native(item) for key, item in value.items()}
    if isinstance(value, list):
        if value and type(value[0]) in (float, int):
            return value
        return [_native(item) for item in value]
    to_native = getattr(value, "to_native", None)
    return to_native() if callable(to_native) else value


def _native_row(record: neo4j.Record) -> Row:
    # Not ``record.data()``: it walks every float of every vector read back, the sync's hot path.
    return {key: _native(value) for key, value in zip(record.keys(), record.values(), strict=True)}


@contextmanager
def _translated_errors() -> Iterator[None]:
    try:
        yield
    except neo4j_errors.AuthError as exc:
        raise ConfigurationError(f"Neo4j refused the credentials: {exc.message}") from exc
    except (neo4j_errors.ServiceUnavailable, neo4j_errors.SessionExpired, OSError) as exc:
        raise ServiceUnavailable("neo4j", " ".join(str(exc).split()), START_HINT) from exc
    except neo4j_errors.TransientError as exc:
        raise TransientError(f"Neo4j transient error: {exc.message}") from exc
    except neo4j_errors.ClientError as exc:
        raise GraphStoreRejected(f"Neo4j refused the statement: {exc.code}: {exc.message}") from exc
    except neo4j_errors.DatabaseError as exc:
        raise TransientError(f"Neo4j database error: {exc.code}: {exc.message}") from exc


class Neo4jStore:
    def __init__(
        self,
        settings: Settings,
        driver: neo4j.Driver | None = None,
        graph: GraphWriter | None = None,
        one_try_reads: bool = False,
    ) -> None:
        """``one_try_reads``: each read is one auto-commit query (one round trip, never retried),
        where a managed transaction takes two (its commit) and retries: the searches' store."""
        self._settings = settings
        self._graph = graph
        self._one_try_reads = one_try_reads
        self._database = settings.neo4j_database
        self._schema_ready: set[tuple[str, int]] = set()
        self._graph_schema_ready = False
        self._claims_guarded = False
        self._schema_lock = threading.Lock()
        # The database the schema was made on (its store id), and when that was last checked.
        self._schema_store_id: str | None = None
        self._schema_checked_at = 0.0
        self._claims_checked_at = 0.0
        self._schema_check_s = settings.neo4j_schema_check_s
        self._retry_base_s = 5
        self._retry_cap_s = settings.reconcile_interval_s * 4
        self._driver = driver or GraphDatabase.driver(
            settings.neo4j_uri,
            auth=(settings.neo4j_user, settings.neo4j_password.get_secret_value()),
            max_connection_pool_size=settings.neo4j_max_pool_size,
            connection_acquisition_timeout=10.0,
            connection_timeout=5.0,
            # Celery retries tasks with backoff; the driver need not retry long on its own.
            max_transaction_retry_time=5.0,
            # A property no Memory has yet (a retry time before any failure) is not worth a warning.
            notifications_disabled_classifications=[neo4j.NotificationDisabledClassification.UNRECOGNIZED],
        )

    def close(self) -> None:
        self._driver.close()

    @property
    def graph(self) -> GraphWriter:
        """What derives sessions and entities in every write (made on first use: an extractor
        such as spaCy's loads a model)."""
        if self._graph is None:
            from shared.graph.extractors import make_extractor

            s = self._settings
            self._graph = GraphWriter(make_extractor(s), s.graph_related_entities)
        return self._graph

    def _read(self, query: LiteralString, **params: Any) -> list[Row]:
        with _translated_errors():
            if self._one_try_reads:
                with self._driver.session(database=self._database, default_access_mode=READ) as session:
                    records = list(session.run(query, params))
            else:
                records, _, _ = self._driver.execute_query(
                    query, params, database_=self._database, routing_=neo4j.RoutingControl.READ
                )
        return [_native_row(record) for record in records]

    def _write(self, query: LiteralString, **params: Any) -> list[Row]:
        with _translated_errors():
            records, _, _ = self._driver.execute_query(query, params, database_=self._database)
        return [record.data() for record in records]

    def read_rows(self, query: LiteralString, **params: Any) -> list[Row]:
        """A read of another adapter over this connection (``neo4j_keys``)."""
        return self._read(query, **params)

    def write_rows(self, query: LiteralString, **params: Any) -> list[Row]:
        return self._write(query, **params)

    # Schema.

    def bootstrap(self, model: str, dimension: int, timeout_s: int = 300) -> None:
        """Constraints, range indexes, the fulltext index and the vector index sized to the model.

        Refuses to run against a store that holds another model's vectors: that is a migration.
        The constraints come first: two processes claiming a new store at once (a first search and
        a first write) would otherwise each MERGE a claim node, and with two of them the uniqueness
        constraint can never be made, so every later write fails.
        """
        self._claims_guarded = False  # made again: this may be another database than before
        self._guard_claims()
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
        self.ensure_vector_index(dimension, timeout_s)

    def ensure_vector_index(self, dimension: int, timeout_s: int = 300) -> None:
        """The vector index on ``Memory.embedding``, sized to ``dimension``, online."""
        existing = self._read(q.SHOW_VECTOR_INDEX, name=q.VECTOR_INDEX)
        if existing and existing[0]["dimension"] != dimension:
            raise ConfigurationError(
                f"vector index {q.VECTOR_INDEX} has {existing[0]['dimension']} dimensions, "
                f"the model has {dimension}"
            )
        if not existing:
            statement = q.CREATE_VECTOR_INDEX.format(dimension=int(dimension))
            self._schema(statement)
        self._write(q.AWAIT_INDEXES, timeout_s=timeout_s)

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
        again once per ``neo4j_schema_check_s``: the database may have been wiped meanwhile)."""
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
        return _claim(rows[0]) if rows else ModelClaim(None)

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

    def missing_schema(self) -> list[str]:
        """The constraints and indexes of the schema the database lacks (or holds not online)."""
        present = {row["name"] for row in self._read(q.SHOW_CONSTRAINT_NAMES)}
        present |= {row["name"] for row in self._read(q.SHOW_INDEX_NAMES)}
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
        return bool(self.missing_schema())

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
                self.bootstrap(model, dimension)
                self._write(q.REGISTER_MODEL, model=model, dimension=dimension)
                self._schema_ready.add((model, dimension))

    # Ingestion.

    def write_documents(self, writes: Sequence[DocumentWrite]) -> WriteOutcome:
        """Upserts documents and their chunks (``pending``), links them, removes stale chunks:
        one transaction, guarded by each document's version."""
        now = utc_now()
        document_rows: list[Row] = []
        memory_rows: list[Row] = []
        pairs: dict[str, list[list[str]]] = {}
        sources: list[GraphSource] = []
        for write in writes:
            staged = write.staged
            doc = staged.document
            document_rows.append(
                {
                    "key": staged.key,
                    "version": staged.version,
                    "external_id": doc.document_id,
                    "user_id": doc.user_id,
                    "project_id": doc.project_id,
                    "session_id": doc.session_id,
                    "source": doc.source,
                    "title": doc.title,
                    "uri": doc.uri,
                    "content_hash": staged.content_hash,
                    "fingerprint": doc.fingerprint(),
                    "metadata": json.dumps(doc.metadata, sort_keys=True),
                    "chunk_count": len(staged.chunks),
                    "created_at": doc.created_at or staged.received_at,
                    "given_created_at": doc.created_at,
                }
            )
            for chunk, vector in zip(staged.chunks, write.vectors, strict=True):
                embedding = [float(x) for x in vector]
                memory = memory_of(staged, chunk.chunk_index, write.model, len(embedding))
                sources.append(GraphSource(memory.id, memory.user_id, memory.content))
                properties = memory.model_dump(exclude={"created_at"})
                memory_rows.append(
                    {
                        "id": chunk.id,
                        "document_key": staged.key,
                        "version": staged.version,
                        "created_at": memory.created_at,
                        "given_created_at": doc.created_at,
                        "embedding": embedding,
                        "properties": properties,
                    }
                )
            ids = [chunk.id for chunk in staged.chunks]
            pairs[staged.key] = [[a, b] for a, b in pairwise(ids)]

        models = {(write.model, len(write.vectors[0])) for write in writes if write.vectors}
        graph = self.graph
        entity_rows = graph.entity_rows(sources)

        def work(tx: ManagedTransaction) -> WriteOutcome:
            # Checked inside the transaction: a migration's switch refuses writes of the old model.
            found = tx.run(mq.MODEL_STATE).single()
            claim = _claim(found.data() if found is not None else {})
            for model, dimension in models:
                refusal = claim.refuse_write(model, dimension)
                if refusal is not None:
                    raise refusal
            accepted = [r["key"] for r in tx.run(q.UPSERT_DOCUMENTS, documents=document_rows, now=now)]
            if not accepted:
                return WriteOutcome(stale=[row["key"] for row in document_rows])
            written = [
                r["id"] for r in tx.run(q.UPSERT_MEMORIES, memories=memory_rows, accepted=accepted, now=now)
            ]
            links = [pair for key in accepted for pair in pairs[key]]
            tx.run(q.LINK_NEXT, pairs=links).consume()
            accepted_set = set(accepted)
            kept = [row for row in document_rows if row["key"] in accepted_set]
            stale_ids = [r["id"] for r in tx.run(gq.STALE_CHUNKS, documents=kept)]
            touched, old_sessions = graph.before_removal(tx, stale_ids)
            removed = [r["id"] for r in tx.run(q.REMOVE_STALE_CHUNKS, documents=kept, now=now)]
            graph.prune(tx, touched)
            written_set = set(written)
            graph.derive(tx, [row for row in entity_rows if row["id"] in written_set], old_sessions)
            return WriteOutcome(
                written=accepted,
                stale=[row["key"] for row in document_rows if row["key"] not in accepted_set],
                memory_ids=written,
                removed_ids=removed,
            )

        with _translated_errors(), self._driver.session(database=self._database) as session:
            return session.execute_write(work)

    def delete_documents(self, keys: Sequence[str], version: int) -> list[str]:
        """Deletes documents not newer than ``version``; returns the Memory ids removed."""
        now = utc_now()
        params: Row = {"keys": list(keys), "version": version, "now": now}

        def work(tx: ManagedTransaction) -> list[Row]:
            ids = [r["id"] for r in tx.run(gq.DOCUMENT_MEMORIES_TO_DELETE, **params)]
            delete = q.DELETE_DOCUMENTS
            removed: list[Row] = self.graph.remove(
                tx, ids, lambda t: [r.data() for r in t.run(delete, **params)]
            )
            return removed

        rows = self._transaction(work)
        return [memory_id for row in rows for memory_id in row["removed"]]

    def _transaction(self, work: Any) -> Any:
        with _translated_errors(), self._driver.session(database=self._database) as session:
            return session.execute_write(work)

    # The derived graph (sessions, turn order, entities): backfill and restore.

    def derive_graph(self, ids: Sequence[str]) -> int:
        """Derives sessions, turn order and entities for these Memories from their own fields, as
        a write does (idempotent): Memories written before the graph existed, or restored."""
        if not self._graph_schema_ready:
            # Before the first entity is merged: without the uniqueness constraints, two writers
            # (a backfill beside a worker of the earlier version) could each make one Entity of
            # the same id, and the constraint could then never be made (every search failing).
            for statement in gq.GRAPH_SCHEMA:
                self._schema(statement)
            self._graph_schema_ready = True
        rows = self._read(gq.MEMORIES_TO_DERIVE, ids=list(ids))
        sources = [GraphSource(r["id"], r["user_id"], r["content"] or "") for r in rows]
        entity_rows = self.graph.entity_rows(sources)
        self._transaction(lambda tx: self.graph.derive(tx, entity_rows))
        return len(rows)

    def memory_ids_page(self, user_id: str | None, after: str | None, limit: int) -> list[str]:
        return [r["id"] for r in self._read(gq.MEMORY_PAGE, user_id=user_id, after=after, limit=limit)]

    # The memory lifecycle.

    def get_memory(self, user_id: str, memory_id: str) -> MemoryRecord | None:
        rows = self._read(q.GET_MEMORY, id=memory_id, user_id=user_id)
        return MemoryRecord.model_validate(rows[0]["memory"]) if rows else None

    def list_memories(
        self, user_id: str, filters: SearchFilters, after: str | None, limit: int
    ) -> list[MemoryRecord]:
        rows = self._read(q.LIST_MEMORIES, after=after, limit=limit, **filter_parameters(user_id, filters))
        return [MemoryRecord.model_validate(row["memory"]) for row in rows]

    def delete_memories(
        self, user_id: str, filters: SearchFilters, ids: Sequence[str] | None, version: int
    ) -> tuple[list[str], int]:
        """Deletes the tenant's Memories matching; returns their ids and how many documents went."""
        params = {
            **filter_parameters(user_id, filters),
            "ids": None if ids is None else list(ids),
            "version": version,
            "now": utc_now(),
        }

        def work(tx: ManagedTransaction) -> list[Row]:
            found = [r["id"] for r in tx.run(MEMORIES_TO_DELETE, **params)]
            delete = q.DELETE_MEMORIES
            removed: list[Row] = self.graph.remove(
                tx, found, lambda t: [r.data() for r in t.run(delete, **params)]
            )
            return removed

        rows = self._transaction(work)
        return list(rows[0]["removed"]), int(rows[0]["emptied"])

    # Sync.

    def sync_rows(self, ids: Sequence[str]) -> SyncRows:
        live: list[StoredVector] = []
        tombstones: list[Tombstone] = []
        for row in self._read(q.SYNC_ROWS, ids=list(ids)):
            memory = row["memory"]
            if memory is not None and memory.get("embedding") is not None:
                embedding = memory.pop("embedding")
                extra = restore_fields(row["document"], memory.get("updated_at"))
                live.append(
                    StoredVector(memory=Memory.model_validate(memory), embedding=embedding, extra=extra)
                )
            elif row["tombstone"] is not None:
                tombstones.append(Tombstone.model_validate(row["tombstone"]))
        return SyncRows(live=live, tombstones=tombstones)

    def mark_synced(self, versions: Mapping[str, int]) -> list[str]:
        if not versions:
            return []
        rows = self._write(q.MARK_SYNCED, rows=_version_rows(versions), now=utc_now())
        return [row["id"] for row in rows]

    def mark_failed(self, versions: Mapping[str, int], error: str, now: datetime) -> int:
        if not versions:
            return 0
        params = {
            "rows": _version_rows(versions),
            "error": error[:2000],
            "now": now,
            "base_s": self._retry_base_s,
            "cap_s": self._retry_cap_s,
        }
        marked = self._write(q.MARK_FAILED, **params)[0]["marked"]
        marked += self._write(q.MARK_TOMBSTONES_FAILED, **params)[0]["marked"]
        return int(marked)

    def forget_tombstones(self, versions: Mapping[str, int]) -> None:
        if versions:
            self._write(q.FORGET_TOMBSTONES, rows=_version_rows(versions))

    # Reconciliation and status.

    def sync_backlog(self, pending_before: datetime, now: datetime, limit: int) -> list[str]:
        rows = self._read(q.SYNC_BACKLOG, pending_before=pending_before, now=now, limit=limit)
        return [row["id"] for row in rows]

    def backlog_size(self, pending_before: datetime, now: datetime) -> int:
        return int(self._read(q.BACKLOG_SIZE, pending_before=pending_before, now=now)[0]["n"] or 0)

    def memory_states(self, after_id: str | None, limit: int) -> list[MemoryState]:
        rows = self._read(q.MEMORY_STATES, after=after_id or "", limit=limit)[0]["rows"]
        return [MemoryState(*row) for row in rows]

    def live_versions(self, ids: Sequence[str]) -> dict[str, int]:
        if not ids:
            return {}
        rows = self._read(q.LIVE_VERSIONS, ids=list(ids))[0]["rows"]
        return {memory_id: int(version) for memory_id, version in rows}

    def tombstoned(self, ids: Sequence[str]) -> set[str]:
        return {row["id"] for row in self._read(q.TOMBSTONED, ids=list(ids))}

    def models(self) -> list[tuple[str, int]]:
        return sorted({(row["model"], int(row["dimension"])) for row in self._read(q.MODELS) if row["model"]})

    def sync_health(self, now: datetime) -> SyncHealth:
        row = self._read(q.SYNC_HEALTH, now=now)[0]
        return SyncHealth(
            counts=self.vector_sync_counts(),
            tombstones=int(row["tombstones"]),
            oldest_pending=row["oldest_pending"],
            retry_due=int(row["retry_due"]),
        )

    def record_reconcile(self, report: str, at: datetime) -> None:
        self._claim(q.RECORD_RECONCILE, report=report, at=at)

    def last_reconcile(self) -> tuple[str, datetime] | None:
        rows = self._read(q.LAST_RECONCILE)
        return (rows[0]["report"], rows[0]["finished_at"]) if rows else None

    def sweep_cursor(self) -> str | None:
        rows = self._read(q.SWEEP_CURSOR)
        return str(rows[0]["cursor"]) if rows and rows[0]["cursor"] is not None else None

    def save_sweep_cursor(self, cursor: str, at: datetime) -> None:
        self._claim(q.SAVE_SWEEP_CURSOR, cursor=cursor, at=at)

    # The store's identity (shared/services/guard.py).

    def identity(self) -> StoreIdentity:
        rows = self._read(iq.IDENTITY)
        memories = int(self._read(iq.MEMORY_COUNT)[0]["n"] or 0)
        if not rows:
            return StoreIdentity(None, memories)
        row = rows[0]
        return StoreIdentity(
            row["store_id"], memories, row["primary_lost"], row["checked_at"], row["qdrant_points"]
        )

    def adopt_identity(self, store_id: str) -> None:
        self._claim(iq.ADOPT_IDENTITY, store_id=store_id, now=utc_now())

    def record_primary(self, lost: str | None, points: int | None) -> None:
        self._claim(iq.RECORD_PRIMARY, reason=lost, points=points, now=utc_now())

    # A restore's checkpoint and what it sets after the write (shared/services/restore.py).

    def restore_state(self, name: str) -> Row | None:
        rows = self._read(iq.RESTORE_STATE, name=name)
        return rows[0] if rows else None

    def save_restore_state(self, name: str, **state: Any) -> None:
        self._claim(iq.SAVE_RESTORE_STATE, name=name, **state)

    def restore_moments(self, rows: list[Row]) -> None:
        if rows:
            self._write(iq.RESTORE_MOMENTS, rows=rows)

    def memory_ids(self, after: str | None, tenant: str | None, limit: int) -> list[str]:
        return [row["id"] for row in self._read(iq.MEMORY_IDS, after=after, tenant=tenant, limit=limit)]

    def export_page(self, after: str | None, tenant: str | None, limit: int) -> list[Row]:
        """A page of Memories (with their vectors) and their documents, in id order: engram backup."""
        return self._read(iq.EXPORT_PAGE, after=after, tenant=tenant, limit=limit)

    def vector_sync_counts(self) -> VectorSyncCounts:
        counts = {row["state"]: row["n"] for row in self._read(q.VECTOR_SYNC_COUNTS) if row["state"]}
        return VectorSyncCounts(**counts)

    def tenant_overview(self, user_id: str) -> TenantOverview:
        row = self._read(q.TENANT_COUNTS, user_id=user_id)[0]
        counts = VectorSyncCounts(pending=row["pending"], synced=row["synced"], failed=row["failed"])
        return TenantOverview(
            user_id=user_id, documents=row["documents"], memories=row["memories"], vector_sync=counts
        )

    def chunk_count(self, keys: Sequence[str]) -> int:
        rows = self._read(q.CHUNK_COUNT, keys=list(keys))
        return int(rows[0]["chunks"] or 0) if rows else 0

    def chunk_texts(self, user_id: str) -> list[str]:
        """Every chunk a tenant holds, in document order: for benchmarks and exports."""
        return [row["content"] for row in self._read(q.CHUNK_TEXTS, user_id=user_id)]

    def document_status(self, key: str) -> Row | None:
        rows = self._read(q.DOCUMENT_STATUS, key=key)
        return rows[0] if rows and rows[0]["ingested_at"] is not None else None

    # A model migration (engram reembed; shared/services/reembed.py).

    def migration(self) -> MigrationState | None:
        rows = self._read(mq.MIGRATION)
        return _migration(rows[0]["migration"]) if rows else None

    def start_migration(
        self, source: tuple[str, int], target: EmbeddingTarget, now: datetime
    ) -> MigrationState:
        current = self.migration()
        if current is not None and current.phase != "done" and current.target.key == target.key:
            self._write(mq.NEXT_RUN)
        else:
            fields = {
                "target_model": target.model,
                "target_dim": target.dimension,
                "target_backend": target.backend,
                "target_url": target.url,
                "target_max_tokens": target.max_tokens,
                "target_tokenizer_path": target.tokenizer_path,
                "target_local_model_path": target.local_model_path,
            }
            self._claim(
                mq.NEW_MIGRATION, target=fields, source_model=source[0], source_dim=source[1], now=now
            )
        started = self.migration()
        assert started is not None
        return started

    def reembed_pending(self, target: EmbeddingTarget, after: str | None, limit: int) -> list[str]:
        rows = self._read(mq.PENDING, after=after, limit=limit, **_target(target))
        return [row["id"] for row in rows]

    def reembed_progress(self, target: EmbeddingTarget) -> tuple[int, int]:
        row = self._read(mq.PROGRESS, **_target(target))[0]
        return int(row["total"] or 0), int(row["done"] or 0)

    def reembed_rows(self, ids: Sequence[str]) -> list[ReembedRow]:
        found: list[ReembedRow] = []
        for row in self._read(mq.ROWS, ids=list(ids)):
            memory = row["memory"]
            model, dim = memory.get("embedding_next_model"), memory.get("embedding_next_dim")
            found.append(
                ReembedRow(
                    memory=Memory.model_validate(memory),
                    next_vector=row["next_vector"],
                    next_model=(model, int(dim)) if model is not None and dim is not None else None,
                    next_version=memory.get("embedding_next_version"),
                    next_synced=bool(memory.get("embedding_next_synced")),
                )
            )
        return found

    def put_next_vectors(
        self, target: EmbeddingTarget, vectors: Mapping[str, tuple[int, list[float]]]
    ) -> list[str]:
        rows = [{"id": k, "version": v, "embedding": e} for k, (v, e) in vectors.items()]
        return [row["id"] for row in self._write(mq.PUT_NEXT, rows=rows, **_target(target))]

    def mark_next_synced(self, target: EmbeddingTarget, versions: Mapping[str, int]) -> None:
        if versions:
            self._write(mq.MARK_NEXT_SYNCED, rows=_version_rows(versions), **_target(target))

    def record_page(self, run: int, reembedded: int) -> None:
        self._write(mq.RECORD_PAGE, run=run, reembedded=reembedded)

    def set_phase(self, phase: MigrationPhase, now: datetime) -> None:
        self._write(mq.SET_PHASE, phase=phase, now=now)

    def drop_vector_index_unless(self, dimension: int) -> None:
        existing = self._read(q.SHOW_VECTOR_INDEX, name=q.VECTOR_INDEX)
        if existing and existing[0]["dimension"] != dimension:
            self._write(mq.DROP_VECTOR_INDEX)
        self._schema_ready.clear()

    def copy_next_vectors(self, target: EmbeddingTarget, limit: int) -> int:
        rows = self._write(mq.COPY_NEXT, limit=limit, now=utc_now(), **_target(target))
        return int(rows[0]["copied"]) if rows else 0

    def not_switched(self, target: EmbeddingTarget) -> int:
        return int(self._read(mq.NOT_SWITCHED, **_target(target))[0]["n"] or 0)

    def finish_switch(self, target: EmbeddingTarget, now: datetime) -> None:
        self._write(mq.FINISH_SWITCH, now=now, **_target(target))
        self._schema_ready.clear()

    def forget_source_model(self, now: datetime) -> None:
        self._write(mq.FORGET_SOURCE_MODEL, now=now)

    # Search (shared/search/sources.py reads these).

    def count_filtered(self, filters: Row, limit: int) -> int:
        """How many Memories pass the tenant and filters, counted up to ``limit``."""
        return int(self._read(sq.COUNT_FILTERED, limit=limit, **filters)[0]["n"])

    def vector_candidates(self, vector: Sequence[float], k: int, filters: Row) -> tuple[int, list[Row]]:
        """(rows the index gave, those passing the filters): {memory, score as (1 + cos) / 2}."""
        row = self._read(sq.VECTOR_CANDIDATES, vector=list(vector), k=k, **filters)[0]
        return int(row["found"]), list(row["kept"])

    def exact_candidates(self, vector: Sequence[float], k: int, filters: Row) -> list[Row]:
        return list(self._read(sq.EXACT_CANDIDATES, vector=list(vector), k=k, **filters)[0]["kept"])

    def fulltext_candidates(
        self, text: str, vector: Sequence[float], k: int, filters: Row
    ) -> tuple[int, list[Row]]:
        row = self._read(sq.FULLTEXT_CANDIDATES, text=text, vector=list(vector), k=k, **filters)[0]
        return int(row["found"]), list(row["kept"])

    def term_frequencies(self, user_id: str, queries: Mapping[str, str], cap: int) -> dict[str, int]:
        """Per term, how many of the tenant's Memories hold it (up to ``cap``); ``queries`` maps
        each term to its Lucene query."""
        params = [{"term": term, "lucene": lucene} for term, lucene in queries.items()]
        rows = self._read(sq.TERM_FREQUENCIES, queries=params, cap=cap, user_id=user_id)
        return {row["term"]: int(row["df"]) for row in rows}

    def tenant_stats(self, user_id: str) -> tuple[int, float]:
        """(Memories the tenant holds, their mean token count)."""
        row = self._read(sq.TENANT_STATS, user_id=user_id)[0]
        return int(row["documents"] or 0), float(row["average_length"] or 0.0)

    def newest_memory(self, user_id: str) -> datetime | None:
        """When the tenant's newest memory was made (none when it holds none)."""
        newest = self._read(sq.NEWEST_MEMORY, user_id=user_id)[0]["newest"]
        return newest if isinstance(newest, datetime) else None

    def embeddings(self, user_id: str, ids: Sequence[str]) -> list[list[float]]:
        return [list(row["embedding"]) for row in self._read(sq.EMBEDDINGS, user_id=user_id, ids=list(ids))]

    def two_scores(
        self, user_id: str, ids: Sequence[str], query: Sequence[float], moved: Sequence[float]
    ) -> dict[str, tuple[float, float]]:
        """Per memory, its cosine with ``query`` and with ``moved`` (each as (1 + cos) / 2)."""
        rows = self._read(
            sq.TWO_SCORES, user_id=user_id, ids=list(ids), original=list(query), moved=list(moved)
        )
        return {row["id"]: (float(row["original"]), float(row["moved"])) for row in rows}

    def stored_documents(self, keys: Sequence[str]) -> int:
        return int(self._read(sq.STORED_DOCUMENTS, keys=list(keys))[0]["n"] or 0)

    def entity_candidates(
        self, keys: Sequence[str], max_memories: int, vector: Sequence[float], k: int, filters: Row
    ) -> list[Row]:
        """Memories naming the tenant's entities of these keys (shared/search/graph_sources.py)."""
        params = {"keys": list(keys), "max_memories": max_memories, "vector": list(vector), "k": k}
        return list(self._read(ENTITY_CANDIDATES, **params, **filters)[0]["kept"])

    def beside_candidates(self, ids: Sequence[str], vector: Sequence[float], filters: Row) -> list[Row]:
        """The memories next to these along NEXT: the turns around a turn, the chunks around a chunk."""
        return list(self._read(BESIDE_CANDIDATES, ids=list(ids), vector=list(vector), **filters)[0]["kept"])

    def mentions_among(
        self, user_id: str, keys: Sequence[str], max_memories: int, ids: Sequence[str]
    ) -> dict[str, tuple[int, list[str]]]:
        """Per entity key of the tenant named by at most ``max_memories`` memories: how many name
        it, and which of ``ids`` do."""
        params = {"user_id": user_id, "keys": list(keys), "max_memories": max_memories, "ids": list(ids)}
        return {r["key"]: (int(r["n"]), list(r["ids"])) for r in self._read(gq.MENTIONS_AMONG, **params)}

    def next_among(self, user_id: str, ids: Sequence[str]) -> list[tuple[str, str]]:
        """The NEXT edges between these memories."""
        return [(r["a"], r["b"]) for r in self._read(gq.NEXT_AMONG, user_id=user_id, ids=list(ids))]

    def neighbours(self, user_id: str, ids: Sequence[str], n: int) -> dict[str, tuple[list[str], list[str]]]:
        rows = self._read(sq.NEIGHBOURS, user_id=user_id, ids=list(ids), n=n)
        return {row["id"]: (list(row["before"]), list(row["after"])) for row in rows}


def _target(target: EmbeddingTarget) -> Row:
    return {"model": target.model, "dimension": target.dimension}


def _claim(row: Mapping[str, Any]) -> ModelClaim:
    def pair(model: Any, dimension: Any) -> tuple[str, int] | None:
        return (str(model), int(dimension)) if model is not None and dimension is not None else None

    return ModelClaim(
        model=pair(row.get("model"), row.get("dimension")),
        phase=row.get("state"),
        source=pair(row.get("source_model"), row.get("source_dim")),
        target=pair(row.get("target_model"), row.get("target_dim")),
    )


def _migration(node: Row) -> MigrationState:
    return MigrationState(
        source=(node["source_model"], int(node["source_dim"])),
        target=EmbeddingTarget(
            model=node["target_model"],
            dimension=int(node["target_dim"]),
            backend=node.get("target_backend") or "local",
            url=node.get("target_url"),
            max_tokens=int(node.get("target_max_tokens") or 256),
            tokenizer_path=node.get("target_tokenizer_path"),
            local_model_path=node.get("target_local_model_path"),
        ),
        phase=node["state"],
        run=int(node["run"]),
        started_at=node["started_at"],
        switched_at=node.get("switched_at"),
        pages=int(node.get("pages") or 0),
        reembedded=int(node.get("reembedded") or 0),
        run_pages=int(node.get("run_pages") or 0),
        run_reembedded=int(node.get("run_reembedded") or 0),
        old_dropped_at=node.get("old_dropped_at"),
    )


def filter_parameters(user_id: str, filters: SearchFilters) -> Row:
    """The tenant and filters as the parameters of MEMORY_FILTER; an absent filter is a null."""
    return {
        "user_id": user_id,
        "project_id": filters.project_id,
        "session_id": filters.session_id,
        "document_id": filters.document_id,
        "memory_types": filters.memory_types,
        "tags": filters.tags,
        "from_date": filters.from_date,
        "to_date": filters.to_date,
        "statuses": filters.statuses,
    }


def restore_fields(document: Row | None, updated_at: Any) -> Row:
    """What a Qdrant payload carries beyond the Memory's own fields, for a restore: its
    document's fields and when the Memory was last written, as JSON."""
    extra: Row = {"updated_at": _iso(updated_at)}
    if document is not None:
        extra["document"] = {key: _iso(value) for key, value in document.items()}
    return extra


def _iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _version_rows(versions: Mapping[str, int]) -> list[Row]:
    return [{"id": memory_id, "version": version} for memory_id, version in versions.items()]


def memory_of(staged: StagedDocument, chunk_index: int, model: str, dimension: int) -> Memory:
    """A chunk as the Memory both stores hold."""
    doc = staged.document
    chunk = staged.chunks[chunk_index]
    return Memory(
        id=chunk.id,
        document_key=staged.key,
        document_id=doc.document_id,
        user_id=doc.user_id,
        chunk_index=chunk.chunk_index,
        content=chunk.content,
        key=chunk.content[:200],
        content_hash=chunk.content_hash,
        token_count=chunk.token_count,
        memory_type=doc.memory_type,
        project_id=doc.project_id,
        session_id=doc.session_id,
        position=doc.position,
        title=doc.title,
        tags=list(doc.tags),
        importance=doc.importance,
        confidence=doc.confidence,
        created_at=doc.created_at or staged.received_at,
        version=staged.version,
        embedding_model=model,
        embedding_dim=dimension,
    )
