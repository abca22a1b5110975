"""The store's identity (shared/services/guard.py), and a restore's checkpoint, the moments it
sets after the write and the pages engram backup exports (shared/services/restore.py)."""

from __future__ import annotations

from typing import Any

from shared.models import utc_now
from shared.stores.base import StoreIdentity
from shared.stores.neo4j import restore_queries as iq
from shared.stores.neo4j.connection import Row
from shared.stores.neo4j.schema import SchemaOps


class RestoreOps(SchemaOps):
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
