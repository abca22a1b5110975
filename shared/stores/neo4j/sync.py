"""The Qdrant sync's side in Neo4j: the rows to copy, what was synced or failed, tombstones, and
the reconciler's reads of the backlog, the drift scan, its reports and its sweep cursor."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from shared.models import Memory, StoredVector, Tombstone, VectorSyncCounts, utc_from_micros, utc_now
from shared.stores.base import MemoryState, SyncHealth, SyncRows
from shared.stores.neo4j import sync_queries as q
from shared.stores.neo4j.connection import Row, version_rows
from shared.stores.neo4j.schema import SchemaOps


class SyncOps(SchemaOps):
    def sync_rows(self, ids: Sequence[str]) -> SyncRows:
        live: list[StoredVector] = []
        tombstones: list[Tombstone] = []
        for row in self._read(q.SYNC_ROWS, ids=list(ids)):
            memory = row["memory"]
            if memory is not None and memory.get("embedding") is not None:
                embedding = memory.pop("embedding")
                updated_at = _moment(memory.pop("updated_at_us"))
                created_at = _moment(memory.pop("created_at_us"))
                # An absent property is left to Memory's default, as a map of all of them did.
                fields = {key: value for key, value in memory.items() if value is not None}
                if created_at is not None:
                    fields["created_at"] = created_at
                extra = restore_fields(_document(row["document"]), updated_at)
                live.append(
                    StoredVector(memory=Memory.model_validate(fields), embedding=embedding, extra=extra)
                )
            elif row["tombstone"] is not None:
                tombstones.append(Tombstone.model_validate(row["tombstone"]))
        return SyncRows(live=live, tombstones=tombstones)

    def mark_synced(self, versions: Mapping[str, int]) -> list[str]:
        if not versions:
            return []
        rows = self._write(q.MARK_SYNCED, rows=version_rows(versions), now=utc_now())
        return [row["id"] for row in rows]

    def mark_failed(self, versions: Mapping[str, int], error: str, now: datetime) -> int:
        if not versions:
            return 0
        params = {
            "rows": version_rows(versions),
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
            self._write(q.FORGET_TOMBSTONES, rows=version_rows(versions))

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

    def vector_sync_counts(self) -> VectorSyncCounts:
        counts = {row["state"]: row["n"] for row in self._read(q.VECTOR_SYNC_COUNTS) if row["state"]}
        return VectorSyncCounts(**counts)

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


def restore_fields(document: Row | None, updated_at: Any) -> Row:
    """What a Qdrant payload carries beyond the Memory's own fields, for a restore: its
    document's fields and when the Memory was last written, as JSON."""
    extra: Row = {"updated_at": _iso(updated_at)}
    if document is not None:
        extra["document"] = {key: _iso(value) for key, value in document.items()}
    return extra


def _moment(micros: int | None) -> datetime | None:
    return None if micros is None else utc_from_micros(micros)


def _document(document: Row | None) -> Row | None:
    """SYNC_ROWS's document with its moments, read as epoch microseconds, as datetimes again."""
    if document is None:
        return None
    fields = {key: value for key, value in document.items() if not key.endswith("_at_us")}
    for key in ("ingested_at", "created_at"):
        fields[key] = _moment(document.get(f"{key}_us"))
    return fields


def _iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value
