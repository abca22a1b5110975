"""Neo4j, the primary store and the source of truth.

Every write is one parameterised ``UNWIND`` per batch inside one transaction, so a batch is either
all in or not at all. Driver errors leave this module as ``shared.errors`` types.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise
from typing import Any, LiteralString

import neo4j
from neo4j import GraphDatabase, ManagedTransaction
from neo4j import exceptions as neo4j_errors

from shared.errors import ConfigurationError, ServiceUnavailable, TransientError
from shared.models import StagedDocument, VectorSyncCounts, utc_now
from shared.settings import Settings
from shared.stores import neo4j_queries as q

START_HINT = "start it with ./ops/demo, or set ENGRAM_NEO4J_URI"
Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class WriteResult:
    memories: list[Row]
    removed_ids: list[str]


def _native(value: Any) -> Any:
    """Neo4j temporal values become Python datetimes, also inside maps and lists."""
    if isinstance(value, dict):
        return {key: _native(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_native(item) for item in value]
    to_native = getattr(value, "to_native", None)
    return to_native() if callable(to_native) else value


def _native_row(row: Row) -> Row:
    return {key: _native(value) for key, value in row.items()}


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


class Neo4jStore:
    def __init__(self, settings: Settings, driver: neo4j.Driver | None = None) -> None:
        self._settings = settings
        self._database = settings.neo4j_database
        self._driver = driver or GraphDatabase.driver(
            settings.neo4j_uri,
            auth=(settings.neo4j_user, settings.neo4j_password.get_secret_value()),
            max_connection_pool_size=settings.neo4j_max_pool_size,
            connection_acquisition_timeout=10.0,
            connection_timeout=5.0,
            # Celery retries tasks with backoff; the driver need not retry long on its own.
            max_transaction_retry_time=5.0,
        )

    def close(self) -> None:
        self._driver.close()

    def _read(self, query: LiteralString, **params: Any) -> list[Row]:
        with _translated_errors():
            records, _, _ = self._driver.execute_query(
                query, params, database_=self._database, routing_=neo4j.RoutingControl.READ
            )
        return [_native_row(record.data()) for record in records]

    def _write(self, query: LiteralString, **params: Any) -> list[Row]:
        with _translated_errors():
            records, _, _ = self._driver.execute_query(query, params, database_=self._database)
        return [record.data() for record in records]

    # Schema.

    def bootstrap(self, model: str, dimension: int, timeout_s: int = 300) -> None:
        """Constraints, range indexes, the fulltext index and the vector index sized to the model.

        Refuses to run against a store that holds another model's vectors: that is a migration.
        """
        claimed = self._write(q.CLAIM_EMBEDDING_MODEL, model=model, dimension=dimension)[0]
        if (claimed["model"], claimed["dimension"]) != (model, dimension):
            raise ConfigurationError(
                f"Neo4j holds vectors of {claimed['model']} ({claimed['dimension']} dimensions) but "
                f"{model} ({dimension}) is configured: re-embed everything before switching models"
            )
        for statement in q.SCHEMA_STATEMENTS:
            self._write(statement)
        existing = self._read(q.SHOW_VECTOR_INDEX, name=q.VECTOR_INDEX)
        if existing and existing[0]["dimension"] != dimension:
            raise ConfigurationError(
                f"vector index {q.VECTOR_INDEX} has {existing[0]['dimension']} dimensions, "
                f"the model has {dimension}"
            )
        if not existing:
            statement = q.CREATE_VECTOR_INDEX.format(dimension=int(dimension))
            self._write(statement)
        self._write(q.AWAIT_INDEXES, timeout_s=timeout_s)

    def stored_model(self) -> tuple[str, int] | None:
        """The model whose vectors the store holds, once a writer has claimed it."""
        rows = self._read(q.STORED_MODEL)
        return (rows[0]["model"], int(rows[0]["dimension"])) if rows else None

    # Ingestion.

    def write_documents(
        self, documents: Sequence[StagedDocument], embeddings: Sequence[Sequence[float]], model: str
    ) -> WriteResult:
        """Upserts documents and their chunks (``pending``), links them, removes stale chunks.

        Returns the Memories written, as Qdrant's payload wants them, and the ids of the chunks
        removed, whose Qdrant points must go too.
        """
        now = utc_now()
        document_rows: list[Row] = []
        memory_rows: list[Row] = []
        pairs: list[list[str]] = []
        vectors = iter(embeddings)
        for staged in documents:
            doc = staged.document
            document_rows.append(
                {
                    "key": staged.key,
                    "external_id": doc.document_id,
                    "user_id": doc.user_id,
                    "project_id": doc.project_id,
                    "session_id": doc.session_id,
                    "source": doc.source,
                    "title": doc.title,
                    "uri": doc.uri,
                    "content_hash": staged.content_hash,
                    "metadata": json.dumps(doc.metadata, sort_keys=True),
                    "chunk_count": len(staged.chunks),
                    "created_at": doc.created_at or staged.received_at,
                    "given_created_at": doc.created_at,
                    "ingested_at": now,
                }
            )
            for chunk in staged.chunks:
                embedding = list(next(vectors))
                memory_rows.append(
                    {
                        "id": chunk.id,
                        "document_key": staged.key,
                        "created_at": doc.created_at or staged.received_at,
                        "given_created_at": doc.created_at,
                        "updated_at": now,
                        "embedding": embedding,
                        "properties": memory_properties(staged, chunk.chunk_index, model, len(embedding)),
                    }
                )
            ids = [chunk.id for chunk in staged.chunks]
            pairs.extend([a, b] for a, b in pairwise(ids))

        def work(tx: ManagedTransaction) -> tuple[dict[str, Row], list[str]]:
            tx.run(q.UPSERT_DOCUMENTS, documents=document_rows).consume()
            stamps = {r["id"]: _native_row(r.data()) for r in tx.run(q.UPSERT_MEMORIES, memories=memory_rows)}
            tx.run(q.LINK_NEXT, pairs=pairs).consume()
            removed = [
                record["id"] for record in tx.run(q.REMOVE_STALE_CHUNKS, documents=document_rows, now=now)
            ]
            return stamps, removed

        with _translated_errors(), self._driver.session(database=self._database) as session:
            stamps, removed = session.execute_write(work)
        written = [
            {**row["properties"], "embedding": row["embedding"], **stamps[row["id"]]} for row in memory_rows
        ]
        return WriteResult(memories=written, removed_ids=removed)

    def mark_synced(self, rows: Sequence[Row]) -> int:
        """Rows of ``id``, ``content_hash``, ``embedding_model``: only a Memory still holding that
        content is marked, so a re-ingestion racing with this sync stays ``pending``."""
        if not rows:
            return 0
        result = self._write(q.MARK_SYNCED, rows=list(rows), now=utc_now())
        return int(result[0]["marked"])

    def mark_failed(self, ids: Sequence[str], error: str) -> int:
        if not ids:
            return 0
        result = self._write(q.MARK_FAILED, ids=list(ids), error=error[:2000])
        return int(result[0]["marked"])

    def forget_tombstones(self, ids: Sequence[str]) -> None:
        if ids:
            self._write(q.FORGET_TOMBSTONES, ids=list(ids))

    # Reconciliation and status.

    def memories_to_resync(self, cutoff: datetime, limit: int) -> list[Row]:
        return [row["memory"] for row in self._read(q.MEMORIES_TO_RESYNC, cutoff=cutoff, limit=limit)]

    def resync_backlog(self, cutoff: datetime) -> tuple[int, int]:
        """How many Memories wait for a re-sync, and how many deletes wait for Qdrant."""
        memories = self._read(q.RESYNC_BACKLOG, cutoff=cutoff)[0]["memories"]
        tombstones = self._read(q.TOMBSTONE_COUNT)[0]["tombstones"]
        return int(memories), int(tombstones)

    def tombstones(self, limit: int) -> list[str]:
        return [row["id"] for row in self._read(q.TOMBSTONES, limit=limit)]

    def vector_sync_counts(self) -> VectorSyncCounts:
        counts = {row["state"]: row["n"] for row in self._read(q.VECTOR_SYNC_COUNTS) if row["state"]}
        return VectorSyncCounts(**counts)

    def chunk_count(self, keys: Sequence[str]) -> int:
        rows = self._read(q.CHUNK_COUNT, keys=list(keys))
        return int(rows[0]["chunks"] or 0) if rows else 0

    def chunk_texts(self, user_id: str) -> list[str]:
        """Every chunk a tenant holds, in document order: for benchmarks and exports."""
        return [row["content"] for row in self._read(q.CHUNK_TEXTS, user_id=user_id)]

    def document_status(self, key: str) -> Row | None:
        rows = self._read(q.DOCUMENT_STATUS, key=key)
        return rows[0] if rows and rows[0]["ingested_at"] is not None else None

    # Search.

    def vector_candidates(self, vector: Sequence[float], k: int, filters: Row) -> list[Row]:
        return self._read(q.VECTOR_CANDIDATES, vector=list(vector), k=k, **filters)

    def exact_candidates(self, vector: Sequence[float], k: int, filters: Row) -> list[Row]:
        return self._read(q.EXACT_CANDIDATES, vector=list(vector), k=k, **filters)

    def fulltext_candidates(self, text: str, vector: Sequence[float], k: int, filters: Row) -> list[Row]:
        return self._read(q.FULLTEXT_CANDIDATES, text=text, vector=list(vector), k=k, **filters)


def memory_properties(staged: StagedDocument, chunk_index: int, model: str, dimension: int) -> Row:
    """A Memory's fields but the vector and timestamps: stored in Neo4j and as the Qdrant payload."""
    doc = staged.document
    chunk = staged.chunks[chunk_index]
    return {
        "id": chunk.id,
        "document_id": doc.document_id,
        "chunk_index": chunk.chunk_index,
        "content": chunk.content,
        "key": chunk.content[:200],
        "content_hash": chunk.content_hash,
        "token_count": chunk.token_count,
        "memory_type": doc.memory_type,
        "user_id": doc.user_id,
        "project_id": doc.project_id,
        "session_id": doc.session_id,
        "title": doc.title,
        "tags": list(doc.tags),
        "importance": doc.importance,
        "confidence": doc.confidence,
        "status": "active",
        "embedding_model": model,
        "embedding_dim": dimension,
    }
