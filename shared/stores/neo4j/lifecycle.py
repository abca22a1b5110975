"""A tenant's Memories read, listed and deleted by the memory API, and what the status reads
count of a tenant or a document."""

from __future__ import annotations

from collections.abc import Sequence

from neo4j import ManagedTransaction

from shared.models import MemoryRecord, SearchFilters, TenantOverview, VectorSyncCounts, utc_now
from shared.stores.neo4j import lifecycle_queries as q
from shared.stores.neo4j.connection import Neo4jConnection, Row
from shared.stores.neo4j.filters import filter_parameters
from shared.stores.neo4j.graph import MEMORIES_TO_DELETE


class LifecycleOps(Neo4jConnection):
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
