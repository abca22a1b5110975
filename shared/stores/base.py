"""The interfaces of the two stores; the stage services see only these.

Neo4j (``GraphStore``) is the source of truth. Qdrant (``VectorStore``) is brought level with it
from what Neo4j holds now, never from a task's own copy. Both stores guard every write with the
version the producer fixed, so an older write arriving late is a no-op in each.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from shared.models import (
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
    updated_at: datetime | None


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
        """A page of Memories in id order, for the drift scan."""
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

    def close(self) -> None: ...


VectorStores = Callable[[str, int], VectorStore]
"""The vector store of one (model, dimension): one collection per model."""
