"""The interfaces of the two stores; the stage services see only these.

Neo4j (``GraphStore``) is the source of truth. Qdrant (``VectorStore``) is brought level with it
from what Neo4j holds now, never from a task's own copy. Both stores guard every write with the
version the producer fixed, so an older write arriving late is a no-op in each.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from shared.errors import ConfigurationError, EngramError, ModelMigration
from shared.models import (
    Memory,
    MemoryRecord,
    PointState,
    SearchFilters,
    StagedDocument,
    StoredVector,
    Tombstone,
    VectorSyncCounts,
)


@dataclass(frozen=True, slots=True)
class VectorPoint:
    """A Memory as a Qdrant point: id = Memory id, the Memory's fields as payload."""

    id: str
    vector: Sequence[float]
    version: int
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DocumentWrite:
    """One document of a batch, with a vector per chunk, to be written at its version."""

    staged: StagedDocument
    vectors: Sequence[Sequence[float]]
    model: str


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    written: list[str] = field(default_factory=list)
    """Document keys now stored at the version written."""
    stale: list[str] = field(default_factory=list)
    """Document keys left alone: the store holds a newer version, or a newer delete."""
    memory_ids: list[str] = field(default_factory=list)
    """Memories written (``pending`` until Qdrant has them)."""
    removed_ids: list[str] = field(default_factory=list)
    """Memories removed (tombstoned until Qdrant has dropped them)."""


@dataclass(frozen=True, slots=True)
class SyncRows:
    """What Neo4j holds now for some ids: live Memories with their vectors, and tombstones."""

    live: list[StoredVector] = field(default_factory=list)
    tombstones: list[Tombstone] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class MemoryState:
    """A Memory as the drift scan sees it."""

    id: str
    version: int | None
    content_hash: str | None
    embedding_model: str | None
    embedding_dim: int | None
    vector_sync: str | None


@dataclass(frozen=True, slots=True)
class StoreIdentity:
    """The primary's store id (None before its first bootstrap), its Memories, and what the last
    check of it by the reconciler found."""

    store_id: str | None
    memories: int
    primary_lost: str | None = None
    checked_at: datetime | None = None
    qdrant_points: int | None = None


@dataclass(frozen=True, slots=True)
class SyncHealth:
    counts: VectorSyncCounts
    tombstones: int
    oldest_pending: datetime | None
    retry_due: int


class GraphStore(Protocol):
    """The primary store. Every method is one transaction."""

    def ensure_schema(self, model: str, dimension: int) -> None: ...

    def stored_model(self) -> tuple[str, int] | None: ...

    def write_documents(self, writes: Sequence[DocumentWrite]) -> WriteOutcome: ...

    def delete_documents(self, keys: Sequence[str], version: int) -> list[str]:
        """Deletes documents not newer than ``version``; returns the Memory ids removed."""
        ...

    def get_memory(self, user_id: str, memory_id: str) -> MemoryRecord | None: ...

    def list_memories(
        self, user_id: str, filters: SearchFilters, after: str | None, limit: int
    ) -> list[MemoryRecord]:
        """A page of the tenant's Memories matching the filters, in id order after ``after``."""
        ...

    def delete_memories(
        self, user_id: str, filters: SearchFilters, ids: Sequence[str] | None, version: int
    ) -> tuple[list[str], int]:
        """Deletes the tenant's Memories matching (not newer than ``version``); returns their ids
        and how many documents went with their last Memory."""
        ...

    def sync_rows(self, ids: Sequence[str]) -> SyncRows: ...

    def mark_synced(self, versions: Mapping[str, int]) -> list[str]:
        """Marks a Memory synced only if it still holds that version; returns the ids marked."""
        ...

    def mark_failed(self, versions: Mapping[str, int], error: str, now: datetime) -> int:
        """Records the error and an attempt on Memories (and tombstones) still at that version;
        the next try is due after a backoff on the attempts."""
        ...

    def forget_tombstones(self, versions: Mapping[str, int]) -> None: ...

    def sync_backlog(self, pending_before: datetime, now: datetime, limit: int) -> list[str]:
        """Ids due for a sync: ``pending`` older than the grace period, ``failed`` whose retry is
        due, oldest due first; tombstones count too."""
        ...

    def backlog_size(self, pending_before: datetime, now: datetime) -> int: ...

    def memory_states(self, after_id: str | None, limit: int) -> list[MemoryState]:
        """A page of Memories in id order after ``after_id`` (from the first if None), for the
        drift scan."""
        ...

    def live_versions(self, ids: Sequence[str]) -> dict[str, int]:
        """The version of each id that is a live Memory (absent ids are not)."""
        ...

    def tombstoned(self, ids: Sequence[str]) -> set[str]: ...

    def models(self) -> list[tuple[str, int]]:
        """Every (model, dimension) that Memories or tombstones were embedded with."""
        ...

    def sync_health(self, now: datetime) -> SyncHealth: ...

    def record_reconcile(self, report: str, at: datetime) -> None: ...

    def last_reconcile(self) -> tuple[str, datetime] | None: ...

    def sweep_cursor(self) -> str | None:
        """Where the scheduled passes' drift sweep got (JSON of shared/services/sweep.py's cursor)."""
        ...

    def save_sweep_cursor(self, cursor: str, at: datetime) -> None: ...


class VectorStore(Protocol):
    """One collection per embedding model; point id = Memory id; payload = the Memory's fields."""

    collection: str

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        """Writes the points; a point already holding a newer version is left as it is."""
        ...

    def delete(self, versions: Mapping[str, int]) -> None:
        """Deletes each point whose version is at most the one given (or that has none)."""
        ...

    def states(self, ids: Sequence[str]) -> dict[str, PointState]: ...

    def scroll(self, after: str | None, limit: int) -> tuple[list[PointState], str | None]:
        """A page of points in id order and the offset of the next page (None at the end)."""
        ...

    def count(self) -> int: ...

    def identity(self) -> str | None:
        """The store id of the primary this collection was last found in step with."""
        ...

    def stamp(self, store_id: str) -> None: ...

    def backed_up_keys(self) -> list[dict[str, Any]]:
        """The API keys kept beside the collection (as Neo4j holds them: hashes, sealed secrets)."""
        ...

    def back_up_keys(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Keeps these API key rows beside the collection, in place of those kept before."""
        ...

    def scroll_payloads(
        self, after: str | None, limit: int, fields: Sequence[str], user_id: str | None = None
    ) -> tuple[list[tuple[str, dict[str, Any]]], str | None]: ...

    def retrieve(self, ids: Sequence[str]) -> list[VectorPoint]:
        """Points with their vectors and payloads, for a restore."""
        ...

    def close(self) -> None: ...


class SearchableVectorStore(VectorStore, Protocol):
    """A collection the process searches itself: a server's, or the embedded one it owns."""

    def search(
        self, vector: Sequence[float], user_id: str, filters: SearchFilters, limit: int
    ) -> list[tuple[dict[str, Any], float]]:
        """The tenant's nearest points passing the filters: (payload, cosine similarity), best first."""
        ...


class VectorConnection(Protocol):
    """The process's vector stores, one collection per model: a Qdrant server (``qdrant.py``) or
    an embedded engine, qdrant-client's local mode (``qdrant.py``) or Qdrant Edge
    (``qdrant_edge.py``). An embedded one is opened by one process only."""

    @property
    def embedded(self) -> bool: ...

    def store(self, model: str, dimension: int) -> SearchableVectorStore: ...

    def dimensions_of(self, model: str) -> list[int]: ...

    def models(self) -> list[tuple[str, int]]: ...

    def drop(self, model: str, dimension: int) -> bool: ...

    def hold(self) -> Path:
        """Embedded only: opens the folder, holding its lock, with everything on disk; its path."""
        ...

    def close(self) -> None: ...


MigrationPhase = Literal["running", "switching", "done"]


@dataclass(frozen=True, slots=True)
class EmbeddingTarget:
    """The model a migration re-embeds into, as the settings that make its embedder (an API key
    is never stored: the worker's own ``ENGRAM_EMBEDDING_API_KEY`` is used)."""

    model: str
    dimension: int
    backend: str = "local"
    url: str | None = None
    max_tokens: int = 256
    tokenizer_path: str | None = None
    local_model_path: str | None = None

    @property
    def key(self) -> tuple[str, int]:
        return (self.model, self.dimension)


@dataclass(frozen=True, slots=True)
class MigrationState:
    """``(:EngramSchema {id: 'migration'})``: the last model migration, under way or done."""

    source: tuple[str, int]
    target: EmbeddingTarget
    phase: MigrationPhase
    run: int
    """Bumped by every ``engram reembed``: pages sent by an earlier run are no-ops."""
    started_at: datetime
    switched_at: datetime | None = None
    pages: int = 0
    """Pages that re-embedded something, over every run."""
    reembedded: int = 0
    """Memories re-embedded, over every run (a Memory rewritten meanwhile counts again)."""
    run_pages: int = 0
    run_reembedded: int = 0
    old_dropped_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ReembedRow:
    """A Memory as a re-embedding page reads it: its fields and its next vector so far."""

    memory: Memory
    next_vector: list[float] | None
    next_model: tuple[str, int] | None
    next_version: int | None
    next_synced: bool

    def next_current(self, target: EmbeddingTarget) -> bool:
        """Its next vector is of the target model and of the version it holds now."""
        return self.next_model == target.key and self.next_version == self.memory.version


class MigrationStore(Protocol):
    """Where a model migration keeps its state and its progress: on the Memories themselves."""

    def stored_model(self) -> tuple[str, int] | None: ...

    def migration(self) -> MigrationState | None: ...

    def start_migration(
        self, source: tuple[str, int], target: EmbeddingTarget, now: datetime
    ) -> MigrationState:
        """A new migration (when none is under way), else the same one at its next run."""
        ...

    def reembed_pending(self, target: EmbeddingTarget, after: str | None, limit: int) -> list[str]:
        """Ids in id order whose next vector is not current and in the target's collection."""
        ...

    def reembed_progress(self, target: EmbeddingTarget) -> tuple[int, int]:
        """(Memories, Memories done)."""
        ...

    def reembed_rows(self, ids: Sequence[str]) -> list[ReembedRow]: ...

    def put_next_vectors(
        self, target: EmbeddingTarget, vectors: Mapping[str, tuple[int, list[float]]]
    ) -> list[str]:
        """Stores each next vector if the Memory is still at that version; returns the ids stored."""
        ...

    def mark_next_synced(self, target: EmbeddingTarget, versions: Mapping[str, int]) -> None: ...

    def record_page(self, run: int, reembedded: int) -> None: ...

    def set_phase(self, phase: MigrationPhase, now: datetime) -> None: ...

    def drop_vector_index_unless(self, dimension: int) -> None:
        """Drops the vector index if it is sized to another dimension."""
        ...

    def copy_next_vectors(self, target: EmbeddingTarget, limit: int) -> int:
        """Moves up to ``limit`` current next vectors into ``embedding``; returns how many."""
        ...

    def not_switched(self, target: EmbeddingTarget) -> int:
        """Memories still holding another model's vector."""
        ...

    def ensure_vector_index(self, dimension: int) -> None: ...

    def finish_switch(self, target: EmbeddingTarget, now: datetime) -> None:
        """The store claims the target model; the migration is done."""
        ...

    def forget_source_model(self, now: datetime) -> None:
        """After the old collection is dropped: no reconciler looks for it again."""
        ...


VectorStores = Callable[[str, int], VectorStore]
"""The vector store of one (model, dimension): one collection per model."""


@dataclass(frozen=True, slots=True)
class ModelClaim:
    """The model the store holds, and the migration if there is one: what every writer and
    every search checks its own model against."""

    model: tuple[str, int] | None
    phase: MigrationPhase | None = None
    source: tuple[str, int] | None = None
    target: tuple[str, int] | None = None

    def refuse_write(self, model: str, dimension: int) -> EngramError | None:
        """Why a write of vectors of this model must wait (transient) or never happen
        (permanent); None when it may go ahead."""
        mine = (model, dimension)
        if self.model is None:
            return None
        if self.model == mine:
            if self.phase == "switching":
                return ModelMigration(
                    "model migration",
                    f"switching the store from {model} to {_name(self.target)}: "
                    "this write waits until the switch is done",
                )
            return None
        if self.phase in ("running", "switching") and self.target == mine:
            return ModelMigration(
                "model migration",
                f"the store holds {_name(self.model)} until the migration to {model} is switched "
                "(engram reembed): this write waits",
            )
        if self.phase == "done" and self.source == mine:
            return ModelMigration(
                "model migration",
                f"the store was switched to {_name(self.model)}: restart this worker with "
                f"ENGRAM_EMBEDDING_MODEL={self.model[0]}",
            )
        return ConfigurationError(
            f"Neo4j holds vectors of {self.model[0]} ({self.model[1]} dimensions) but {model} "
            f"({dimension}) is configured: change models with `engram reembed`, a migration"
        )

    def refuse_search(self, model: str, dimension: int) -> ModelMigration | None:
        """A search never compares one model's query vector with another's vectors."""
        if self.model is None:
            return None
        if self.model != (model, dimension):
            return ModelMigration(
                "model migration",
                f"the store holds vectors of {_name(self.model)}: restart the query worker with "
                f"model {self.model[0]} (ENGRAM_EMBEDDING_MODEL)",
            )
        if self.phase == "switching":
            return ModelMigration(
                "model migration",
                f"switching the store from {model} to {_name(self.target)}; searches resume when it is done",
            )
        return None


def _name(model: tuple[str, int] | None) -> str:
    return "another model" if model is None else f"{model[0]} ({model[1]} dimensions)"
