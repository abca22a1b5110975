"""What Neo4j is to the write workers' ``Syncer`` and the reconciler's ``DriftSweep``, shared by
processes racing on one Qdrant server: each Memory's newest version (an older commit never wins, as
Neo4j's version guard), whether it is a delete, and whether its tombstone is still kept.

A manager's dict and lock hold the rows, so a worker process and the test's own read the same
primary. A step is committed before its sync is sent, as the write stage commits to Neo4j before
it queues the sync; a worker then syncs what the primary holds when it reads it, not what it sent.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping, MutableMapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast

from shared.models import Memory, StoredVector, Tombstone
from shared.services.sync import Syncer
from shared.stores.base import GraphStore, MemoryState, SyncRows, VectorStores

MODEL, DIM = "race-model", 4
CREATED = datetime(2026, 1, 1, tzinfo=UTC)

Row = tuple[int, bool, bool]  # (version, deleted, tombstone kept)


def pid(base: int, document: int) -> str:
    return str(uuid.UUID(int=base + document))


def vector_of(document: int, version: int) -> list[float]:
    return [1.0, float(version), float(document), 0.5]


def content_hash(document: int, version: int) -> str:
    return f"{document}-{version}"


def memory(point_id: str, document: int, version: int) -> Memory:
    return Memory(
        id=point_id,
        document_id=str(document),
        user_id="racer",
        chunk_index=0,
        content=f"document {document} v{version}",
        key=point_id,
        content_hash=content_hash(document, version),
        token_count=3,
        created_at=CREATED,
        version=version,
        embedding_model=MODEL,
        embedding_dim=DIM,
    )


class RacePrimary:
    """The primary's rows by Memory id (see the module docstring)."""

    def __init__(self, rows: MutableMapping[str, Row], lock: threading.Lock) -> None:
        self._rows = rows
        self._lock = lock

    def commit(self, base: int, document: int, version: int, delete: bool) -> None:
        point_id = pid(base, document)
        with self._lock:
            current = self._rows.get(point_id)
            if current is None or version > current[0]:
                self._rows[point_id] = (version, delete, delete)

    def syncer(self, vectors: VectorStores) -> Syncer:
        return Syncer(cast(GraphStore, self), vectors, lambda: datetime.now(UTC))

    # What Syncer asks of the primary.
    def sync_rows(self, ids: Sequence[str]) -> SyncRows:
        rows = SyncRows()
        for point_id in ids:
            found = self._rows.get(point_id)
            if found is None:
                continue
            version, deleted, kept = found
            document = uuid.UUID(point_id).int % 1000
            if not deleted:
                rows.live.append(
                    StoredVector(
                        memory=memory(point_id, document, version), embedding=vector_of(document, version)
                    )
                )
            elif kept:
                rows.tombstones.append(
                    Tombstone(id=point_id, version=version, embedding_model=MODEL, embedding_dim=DIM)
                )
        return rows

    def mark_synced(self, versions: Mapping[str, int]) -> list[str]:
        return [i for i, v in versions.items() if self._rows.get(i) == (v, False, False)]

    def mark_failed(self, versions: Mapping[str, int], error: str, now: datetime) -> int:
        raise AssertionError(f"a sync failed: {error}")

    def forget_tombstones(self, versions: Mapping[str, int]) -> None:
        with self._lock:
            for point_id, version in versions.items():
                if self._rows.get(point_id) == (version, True, True):
                    self._rows[point_id] = (version, True, False)

    def stored_model(self) -> tuple[str, int] | None:
        return MODEL, DIM

    # What the reconciler's sweep asks of it.
    def models(self) -> list[tuple[str, int]]:
        return [(MODEL, DIM)]

    def memory_states(self, after_id: str | None, limit: int) -> list[MemoryState]:
        live = sorted((i, row) for i, row in dict(self._rows).items() if not row[1])
        page = [(i, row) for i, row in live if after_id is None or i > after_id][:limit]
        return [
            MemoryState(i, v, content_hash(uuid.UUID(i).int % 1000, v), MODEL, DIM, "synced")
            for i, (v, _, _) in page
        ]

    def live_versions(self, ids: Sequence[str]) -> dict[str, int]:
        found: dict[str, Any] = {i: self._rows.get(i) for i in ids}
        return {i: row[0] for i, row in found.items() if row is not None and not row[1]}
