"""In-memory fakes of our own store Protocols, for the stage services' unit tests.

``FakeGraph`` follows the Cypher of ``shared/stores/neo4j/*_queries.py`` statement by statement
(version guards, DeletedDocument and DeletedMemory tombstones, the sync backoff and backlog
order); ``FakeVectors`` follows the version guard of ``shared/stores/qdrant.py``. Where the
Cypher has a quirk, the fake has it too, so a test on the fake says what Neo4j would do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from shared.embedding.base import Vectors, normalise
from shared.errors import ConfigurationError, EngramError, GraphStoreRejected, VectorStoreRejected
from shared.ids import content_hash, document_key
from shared.ids import memory_id as chunk_id
from shared.models import (
    ChunkRecord,
    DocumentIn,
    Memory,
    MemoryRecord,
    PointState,
    SearchFilters,
    StagedDocument,
    StoredVector,
    Tombstone,
    VectorSync,
    VectorSyncCounts,
)
from shared.stores.base import (
    DocumentWrite,
    MemoryState,
    StoreIdentity,
    SyncHealth,
    SyncRows,
    VectorPoint,
    WriteOutcome,
)
from shared.stores.neo4j import memory_of

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
MODEL = "test-model"
DIM = 3


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


# Graph


@dataclass(slots=True)
class StoredDocument:
    version: int
    content_hash: str
    chunk_count: int
    memory_ids: set[str] = field(default_factory=set)


@dataclass(slots=True)
class StoredMemory:
    memory: Memory
    embedding: list[float]
    updated_at: datetime
    vector_sync: VectorSync = "pending"
    error: str | None = None
    attempts: int = 0
    retry_at: datetime | None = None
    synced_at: datetime | None = None


@dataclass(slots=True)
class StoredTombstone:
    version: int
    embedding_model: str | None
    embedding_dim: int | None
    deleted_at: datetime
    retry_at: datetime | None = None
    attempts: int = 0
    error: str | None = None


class FakeGraph:
    """``GraphStore`` in memory, as the Cypher of ``neo4j/*_queries.py`` behaves."""

    def __init__(self, clock: Callable[[], datetime], retry_base_s: int = 5, retry_cap_s: int = 1200) -> None:
        self.clock = clock
        self.retry_base_s = retry_base_s
        self.retry_cap_s = retry_cap_s
        self.documents: dict[str, StoredDocument] = {}
        self.deleted_documents: dict[str, int] = {}
        self.memories: dict[str, StoredMemory] = {}
        self.tombstones: dict[str, StoredTombstone] = {}
        self.schema: tuple[str, int] | None = None
        self.registered: set[tuple[str, int]] = set()
        self.refuse: set[str] = set()
        """Document keys whose write Neo4j refuses (GraphStoreRejected fails the whole transaction)."""
        self.write_calls: list[list[str]] = []
        self.reconcile: tuple[str, datetime] | None = None
        self.sweep: str | None = None
        self.store_id: str | None = "store-a"
        self.primary_lost: str | None = None
        self.qdrant_points: int | None = None
        self.restore_states: dict[str, dict[str, Any]] = {}
        self.moments: list[dict[str, Any]] = []
        self.missing: list[str] = []
        """Constraints and indexes the database lacks (one Neo4j refused to make)."""

    # Schema.

    def ensure_schema(self, model: str, dimension: int) -> None:
        if self.schema is None:
            self.schema = (model, dimension)
        elif self.schema != (model, dimension):
            raise ConfigurationError(f"Neo4j holds vectors of {self.schema}, not {(model, dimension)}")
        self.registered.add((model, dimension))

    def bootstrap(self, model: str, dimension: int, timeout_s: int = 300) -> None:
        self.ensure_schema(model, dimension)

    def missing_schema(self) -> list[str]:
        return list(self.missing)

    def register_model(self, model: str, dimension: int) -> None:
        """An EmbeddingModel node, as a past model (before a migration) leaves behind."""
        self.registered.add((model, dimension))

    def stored_model(self) -> tuple[str, int] | None:
        return self.schema

    # Writes (UPSERT_DOCUMENTS, UPSERT_MEMORIES, REMOVE_STALE_CHUNKS).

    def write_documents(self, writes: Sequence[DocumentWrite]) -> WriteOutcome:
        keys = [w.staged.key for w in writes]
        self.write_calls.append(keys)
        refused = [key for key in keys if key in self.refuse]
        if refused:
            raise GraphStoreRejected(f"Neo4j refused the statement: document {refused[0]}")
        now = self.clock()
        accepted: list[str] = []
        for write in writes:
            staged = write.staged
            gone = self.deleted_documents.get(staged.key)
            if gone is not None and gone >= staged.version:
                continue
            doc = self.documents.get(staged.key)
            if doc is not None and doc.version > staged.version:
                continue
            if doc is None:
                doc = self.documents[staged.key] = StoredDocument(staged.version, "", 0)
            doc.version = staged.version
            doc.content_hash = staged.content_hash
            doc.chunk_count = len(staged.chunks)
            self.deleted_documents.pop(staged.key, None)
            accepted.append(staged.key)
        if not accepted:
            return WriteOutcome(stale=keys)
        written: list[str] = []
        for write in writes:
            staged = write.staged
            if staged.key not in accepted or self.documents[staged.key].version != staged.version:
                continue
            for chunk, vector in zip(staged.chunks, write.vectors, strict=True):
                embedding = [float(x) for x in vector]
                memory = memory_of(staged, chunk.chunk_index, write.model, len(embedding))
                old = self.memories.get(chunk.id)
                if old is not None and staged.document.created_at is None:
                    memory = memory.model_copy(update={"created_at": old.memory.created_at})
                self.memories[chunk.id] = StoredMemory(memory, embedding, updated_at=now)
                self.documents[staged.key].memory_ids.add(chunk.id)
                self.tombstones.pop(chunk.id, None)
                written.append(chunk.id)
        removed: list[str] = []
        for write in writes:
            key, version = write.staged.key, write.staged.version
            if key not in accepted:
                continue
            doc = self.documents[key]
            for memory_id in sorted(doc.memory_ids):
                stored = self.memories[memory_id]
                if stored.memory.version < version:
                    self._tombstone(memory_id, stored, version, now)
                    doc.memory_ids.discard(memory_id)
                    removed.append(memory_id)
        return WriteOutcome(
            written=accepted,
            stale=[key for key in keys if key not in accepted],
            memory_ids=written,
            removed_ids=removed,
        )

    def _tombstone(self, memory_id: str, stored: StoredMemory, version: int, now: datetime) -> None:
        self.tombstones[memory_id] = StoredTombstone(
            version=version,
            embedding_model=stored.memory.embedding_model,
            embedding_dim=stored.memory.embedding_dim,
            deleted_at=now,
        )
        del self.memories[memory_id]

    def delete_documents(self, keys: Sequence[str], version: int) -> list[str]:
        """DELETE_DOCUMENTS: a DeletedDocument for every key, even one not stored yet."""
        now = self.clock()
        removed: list[str] = []
        for key in keys:
            self.deleted_documents[key] = max(self.deleted_documents.get(key, version), version)
            doc = self.documents.get(key)
            if doc is None or doc.version > version:
                continue
            for memory_id in sorted(doc.memory_ids):
                self._tombstone(memory_id, self.memories[memory_id], version, now)
                removed.append(memory_id)
            del self.documents[key]
        return removed

    # The memory lifecycle: not used by the services tested with this fake.

    def get_memory(self, user_id: str, memory_id: str) -> MemoryRecord | None:
        raise NotImplementedError

    def list_memories(
        self, user_id: str, filters: SearchFilters, after: str | None, limit: int
    ) -> list[MemoryRecord]:
        raise NotImplementedError

    def delete_memories(
        self, user_id: str, filters: SearchFilters, ids: Sequence[str] | None, version: int
    ) -> tuple[list[str], int]:
        raise NotImplementedError

    # Sync.

    def sync_rows(self, ids: Sequence[str]) -> SyncRows:
        live: list[StoredVector] = []
        tombstones: list[Tombstone] = []
        for memory_id in ids:
            stored = self.memories.get(memory_id)
            tombstone = self.tombstones.get(memory_id)
            if stored is not None:
                live.append(StoredVector(memory=stored.memory, embedding=list(stored.embedding)))
            elif tombstone is not None:
                tombstones.append(
                    Tombstone(
                        id=memory_id,
                        version=tombstone.version,
                        embedding_model=tombstone.embedding_model,
                        embedding_dim=tombstone.embedding_dim,
                    )
                )
        return SyncRows(live=live, tombstones=tombstones)

    def mark_synced(self, versions: Mapping[str, int]) -> list[str]:
        marked: list[str] = []
        for memory_id, version in versions.items():
            stored = self.memories.get(memory_id)
            if stored is not None and stored.memory.version == version:
                stored.vector_sync, stored.synced_at = "synced", self.clock()
                stored.error, stored.retry_at = None, None
                marked.append(memory_id)
        return marked

    def _backoff(self, attempts: int) -> timedelta:
        wait = self.retry_base_s * 2.0**attempts
        return timedelta(seconds=self.retry_cap_s if wait > self.retry_cap_s else int(wait))

    def mark_failed(self, versions: Mapping[str, int], error: str, now: datetime) -> int:
        marked = 0
        for memory_id, version in versions.items():
            stored = self.memories.get(memory_id)
            if stored is not None and stored.memory.version == version:
                stored.attempts += 1
                stored.vector_sync, stored.error = "failed", error[:2000]
                stored.retry_at = now + self._backoff(stored.attempts)
                marked += 1
        for memory_id, version in versions.items():
            tombstone = self.tombstones.get(memory_id)
            if tombstone is not None and tombstone.version == version:
                tombstone.attempts += 1
                tombstone.error = error[:2000]
                tombstone.retry_at = now + self._backoff(tombstone.attempts)
                marked += 1
        return marked

    def forget_tombstones(self, versions: Mapping[str, int]) -> None:
        for memory_id, version in versions.items():
            tombstone = self.tombstones.get(memory_id)
            if tombstone is not None and tombstone.version == version:
                del self.tombstones[memory_id]

    # Reconciliation and status.

    def _due(self, pending_before: datetime, now: datetime) -> list[tuple[datetime, str]]:
        due: list[tuple[datetime, str]] = []
        for memory_id, m in self.memories.items():
            if m.vector_sync == "pending" and m.updated_at < pending_before:
                due.append((m.updated_at, memory_id))
            elif m.vector_sync == "failed" and (m.retry_at or m.updated_at) <= now:
                due.append((m.retry_at or m.updated_at, memory_id))
        for memory_id, t in self.tombstones.items():
            if t.deleted_at < pending_before and (t.retry_at or t.deleted_at) <= now:
                due.append((t.retry_at or t.deleted_at, memory_id))
        return sorted(due)

    def sync_backlog(self, pending_before: datetime, now: datetime, limit: int) -> list[str]:
        return [memory_id for _, memory_id in self._due(pending_before, now)[:limit]]

    def backlog_size(self, pending_before: datetime, now: datetime) -> int:
        return len(self._due(pending_before, now))

    def memory_states(self, after_id: str | None, limit: int) -> list[MemoryState]:
        ids = sorted(i for i in self.memories if after_id is None or i > after_id)[:limit]
        return [
            MemoryState(
                id=i,
                version=self.memories[i].memory.version,
                content_hash=self.memories[i].memory.content_hash,
                embedding_model=self.memories[i].memory.embedding_model,
                embedding_dim=self.memories[i].memory.embedding_dim,
                vector_sync=self.memories[i].vector_sync,
            )
            for i in ids
        ]

    def live_versions(self, ids: Sequence[str]) -> dict[str, int]:
        return {i: self.memories[i].memory.version for i in ids if i in self.memories}

    def tombstoned(self, ids: Sequence[str]) -> set[str]:
        return {i for i in ids if i in self.tombstones}

    def models(self) -> list[tuple[str, int]]:
        found = set(self.registered)
        if self.schema is not None:
            found.add(self.schema)
        return sorted(found)

    def sync_health(self, now: datetime) -> SyncHealth:
        counts = VectorSyncCounts(
            pending=sum(m.vector_sync == "pending" for m in self.memories.values()),
            synced=sum(m.vector_sync == "synced" for m in self.memories.values()),
            failed=sum(m.vector_sync == "failed" for m in self.memories.values()),
        )
        pending = [m.updated_at for m in self.memories.values() if m.vector_sync == "pending"]
        retry_due = sum(
            m.vector_sync == "failed" and (m.retry_at or m.updated_at) <= now for m in self.memories.values()
        )
        return SyncHealth(counts, len(self.tombstones), min(pending, default=None), retry_due)

    def record_reconcile(self, report: str, at: datetime) -> None:
        self.reconcile = (report, at)

    def last_reconcile(self) -> tuple[str, datetime] | None:
        return self.reconcile

    def sweep_cursor(self) -> str | None:
        return self.sweep

    def save_sweep_cursor(self, cursor: str, at: datetime) -> None:
        self.sweep = cursor

    # The store's identity and a restore's checkpoint (neo4j/restore_queries.py).

    def identity(self) -> StoreIdentity:
        return StoreIdentity(self.store_id, len(self.memories), self.primary_lost, None, self.qdrant_points)

    def adopt_identity(self, store_id: str) -> None:
        self.store_id, self.primary_lost = store_id, None

    def record_primary(self, lost: str | None, points: int | None) -> None:
        self.primary_lost, self.qdrant_points = lost, points

    def restore_state(self, name: str) -> dict[str, Any] | None:
        return self.restore_states.get(name)

    def save_restore_state(self, name: str, **state: Any) -> None:
        self.restore_states[name] = dict(state)

    def restore_moments(self, rows: list[dict[str, Any]]) -> None:
        self.moments += rows

    def memory_ids(self, after: str | None, tenant: str | None, limit: int) -> list[str]:
        ids = sorted(
            i
            for i, m in self.memories.items()
            if (after is None or i > after) and (tenant is None or m.memory.user_id == tenant)
        )
        return ids[:limit]

    # For the tests.

    def versions_of(self, key: str) -> dict[str, int]:
        """The live Memories of a document, id -> version."""
        doc = self.documents.get(key)
        return {} if doc is None else {i: self.memories[i].memory.version for i in sorted(doc.memory_ids)}


# Vectors


@dataclass(frozen=True, slots=True)
class StoredPoint:
    vector: list[float]
    version: int | None
    payload: dict[str, object]


class FakeVectors:
    """``VectorStore`` of one collection in memory, with Qdrant's version guard."""

    def __init__(self, collection: str) -> None:
        self.collection = collection
        self.points: dict[str, StoredPoint] = {}
        self.fail_with: EngramError | None = None
        """Raised by every operation while set (Qdrant down, or refusing everything)."""
        self.reject_ids: set[str] = set()
        """An upsert holding any of these ids is refused whole (VectorStoreRejected)."""
        self.before_upsert: list[Callable[[Sequence[VectorPoint]], None]] = []
        """Run (once each, first in first) just before an upsert applies: to interleave writers."""
        self.upserts = 0
        self.metadata: dict[str, str] = {}
        self.keys: list[dict[str, Any]] = []

    def _check(self) -> None:
        if self.fail_with is not None:
            raise self.fail_with

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        self._check()
        if any(p.id in self.reject_ids for p in points):
            raise VectorStoreRejected("qdrant refused upsert: HTTP 400 Bad Request")
        if self.before_upsert:
            self.before_upsert.pop(0)(points)
        self.upserts += 1
        for p in points:
            held = self.points.get(p.id)
            if held is not None and held.version is not None and held.version > p.version:
                continue
            self.points[p.id] = StoredPoint(list(p.vector), p.version, {**p.payload, "version": p.version})

    def delete(self, versions: Mapping[str, int]) -> None:
        self._check()
        for point_id, version in versions.items():
            held = self.points.get(point_id)
            if held is not None and (held.version is None or held.version <= version):
                del self.points[point_id]

    def _state(self, point_id: str) -> PointState:
        point = self.points[point_id]
        hash_, model = point.payload.get("content_hash"), point.payload.get("embedding_model")
        return PointState(
            id=point_id,
            version=point.version,
            content_hash=hash_ if isinstance(hash_, str) else None,
            embedding_model=model if isinstance(model, str) else None,
        )

    def states(self, ids: Sequence[str]) -> dict[str, PointState]:
        self._check()
        return {i: self._state(i) for i in ids if i in self.points}

    def scroll(self, after: str | None, limit: int) -> tuple[list[PointState], str | None]:
        """Qdrant's offset is the first id of the next page (inclusive)."""
        self._check()
        ids = sorted(i for i in self.points if after is None or i >= after)
        page, rest = ids[:limit], ids[limit:]
        return [self._state(i) for i in page], rest[0] if rest else None

    def count(self) -> int:
        self._check()
        return len(self.points)

    def identity(self) -> str | None:
        self._check()
        return self.metadata.get("engram_store_id")

    def stamp(self, store_id: str) -> None:
        self._check()
        self.metadata["engram_store_id"] = store_id

    def backed_up_keys(self) -> list[dict[str, Any]]:
        self._check()
        return [dict(row) for row in self.keys]

    def back_up_keys(self, rows: Sequence[Mapping[str, Any]]) -> None:
        self._check()
        self.keys = [dict(row) for row in rows]

    def scroll_payloads(
        self, after: str | None, limit: int, fields: Sequence[str], user_id: str | None = None
    ) -> tuple[list[tuple[str, dict[str, Any]]], str | None]:
        self._check()
        ids = sorted(
            i
            for i, p in self.points.items()
            if (after is None or i >= after) and (user_id is None or p.payload.get("user_id") == user_id)
        )
        page, rest = ids[:limit], ids[limit:]
        rows = [(i, {f: self.points[i].payload.get(f) for f in fields}) for i in page]
        return rows, rest[0] if rest else None

    def retrieve(self, ids: Sequence[str]) -> list[VectorPoint]:
        self._check()
        return [
            VectorPoint(
                i, list(self.points[i].vector), self.points[i].version or 0, dict(self.points[i].payload)
            )
            for i in ids
            if i in self.points
        ]

    def close(self) -> None:
        pass

    def put_raw(self, point_id: str, version: int | None, **payload: object) -> None:
        """A point as some earlier writer (or a lost delete) left it."""
        self.points[point_id] = StoredPoint([0.0] * DIM, version, {**payload, "version": version})

    def version(self, point_id: str) -> int | None:
        return self.points[point_id].version


class FakeVectorSpace:
    """``VectorStores``: one ``FakeVectors`` per (model, dimension)."""

    def __init__(self) -> None:
        self.stores: dict[tuple[str, int], FakeVectors] = {}

    def __call__(self, model: str, dimension: int) -> FakeVectors:
        key = (model, dimension)
        if key not in self.stores:
            self.stores[key] = FakeVectors(f"test_{model}_{dimension}")
        return self.stores[key]


# Embedder


class FakeEmbedder:
    """``Embedder``: a deterministic vector per text, counting calls."""

    def __init__(self, model_name: str = MODEL, dimension: int = DIM) -> None:
        self._model = model_name
        self._dimension = dimension
        self.calls: list[list[str]] = []

    @property
    def model_name(self) -> str:
        return self._model

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls.append(list(texts))
        rows = [
            [float(len(t) + 1), float(sum(map(ord, t)) % 97 + 1), float(i + 1)] for i, t in enumerate(texts)
        ]
        array = np.array(rows, dtype=np.float32).reshape(len(texts), 3)[:, : self._dimension]
        return normalise(np.ascontiguousarray(array))

    def embed_query(self, text: str) -> Vectors:
        row: Vectors = self.embed([text])[0]
        return row


# Documents


def staged(
    document_id: str,
    version: int,
    texts: Iterable[str],
    user_id: str = "alice",
) -> StagedDocument:
    """A chunked document of ``texts`` (one chunk each) at ``version``."""
    chunks = list(texts)
    document = DocumentIn(user_id=user_id, id=document_id, text=" ".join(chunks), title=document_id)
    return StagedDocument(
        document=document,
        key=document_key(user_id, document_id),
        version=version,
        content_hash=content_hash(document.text),
        received_at=T0,
        chunks=[
            ChunkRecord(
                id=chunk_id(user_id, document_id, index),
                chunk_index=index,
                content=text,
                content_hash=content_hash(text),
                token_count=len(text.split()),
            )
            for index, text in enumerate(chunks)
        ],
    )


def write_of(doc: StagedDocument, model: str = MODEL, dimension: int = DIM) -> DocumentWrite:
    """The document with one vector per chunk, as the write stage hands it to the store."""
    vectors = [
        [float(doc.version), float(i + 1), 1.0][:dimension] + [0.0] * (dimension - 3)
        for i in range(len(doc.chunks))
    ]
    return DocumentWrite(doc, vectors, model)
