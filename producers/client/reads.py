"""The broker client's reads: memories and entities, searches through the query queue, and the
store's counts (queues, sync health, how far the backup has each tenant)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import celery.exceptions

from producers.client.base import ClientBase, queue_errors
from shared.errors import SearchTimeout
from shared.graph.models import EntityDetail, EntityPage
from shared.models import (
    MemoryPage,
    MemoryRecord,
    SearchFilters,
    SearchRequest,
    SearchResponse,
    TenantOverview,
    utc_now,
)
from shared.progress import ProgressRecord
from shared.redis_client import translated_errors
from shared.services import census
from shared.stores.folders import embedded_folder
from workers import fair_share
from workers.app import QUEUES, SEARCH_SHOWN, SEARCH_TASK


class Reads(ClientBase):
    def get_memory(self, user_id: str, memory_id: str) -> MemoryRecord | None:
        return self._lifecycle().get_memory(user_id, memory_id)

    def list_memories(
        self, user_id: str, filters: SearchFilters | None = None, limit: int = 100, cursor: str | None = None
    ) -> MemoryPage:
        return self._lifecycle().list_memories(user_id, filters or SearchFilters(), limit, cursor)

    # The entity graph (shared/graph, shared/stores/neo4j_entities.py).

    def list_entities(
        self,
        user_id: str,
        prefix: str | None = None,
        text: str | None = None,
        kind: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> EntityPage:
        return self._container.entities.list_entities(user_id, prefix, text, kind, limit, offset)

    def get_entity(self, user_id: str, name: str) -> EntityDetail | None:
        return self._container.entities.get_entity(user_id, name)

    # Search, through its queue.

    def search(self, request: SearchRequest, timeout_s: float | None = None) -> SearchResponse:
        timeout = timeout_s or self.settings.search_timeout_s
        self.ping()  # fails at once with a clear line, where Celery would retry for long
        with queue_errors():
            result = self._app.send_task(
                SEARCH_TASK, args=(request.model_dump(mode="json"),), expires=timeout, **SEARCH_SHOWN
            )
            try:
                answer = result.get(timeout=timeout, propagate=True)
            except celery.exceptions.TimeoutError as exc:
                result.revoke()
                result.forget()  # now: the subscription still waiting for it
                raise SearchTimeout(f"no query worker answered within {timeout:g} s") from exc
            finally:
                self._drop_later(result.id)  # the answer's, or the error's
        return SearchResponse.model_validate(answer)

    # The store's state.

    def recent_ingestions(self, user_id: str | None, limit: int = 50) -> list[ProgressRecord]:
        """The newest ingestions and where each is: a tenant's, or every tenant's (None)."""
        return self._progress.recent(user_id, limit)

    def failures(self, user_id: str | None, limit: int = 50) -> list[ProgressRecord]:
        """Documents recorded failed, newest first: a tenant's, or every tenant's (None), from
        the failure index (shared/progress.py), not a scan."""
        return self._progress.failures(user_id, limit)

    def queue_depths(self) -> dict[str, int]:
        with translated_errors():
            return fair_share.queue_lengths(self._redis, QUEUES)

    def document_states(self) -> dict[str, int]:
        """Documents with a progress record, by state (Redis alone)."""
        return self._progress.count_states()

    def overview(self) -> dict[str, Any]:
        """Queue lengths, the vector_sync counts and sync health of the whole store, and the
        reconciler's last pass."""
        with translated_errors():
            queues = fair_share.queue_lengths(self._redis, QUEUES)
        store = self._store()
        health = store.sync_health(utc_now())
        last = store.last_reconcile()
        return {
            "queues": queues,
            "stores": self.stores(),
            "vector_sync": health.counts.model_dump(),
            "sync_health": {
                "tombstones": health.tombstones,
                "oldest_pending": health.oldest_pending,
                "retry_due": health.retry_due,
                "last_reconcile": json.loads(last[0]) if last else None,
            },
        }

    def stores(self) -> dict[str, Any]:
        """Memories in Neo4j beside points in Qdrant, over every model's collection (counted now
        with a server; as the last reconcile pass counted them when embedded, as only its owner
        may open the folder), and whether the reconciler found the primary lost."""
        identity = self._store().identity()
        points: int | None = identity.qdrant_points
        counted_at = identity.checked_at
        stored = self._store().stored_model()
        if self.settings.qdrant_url is not None and stored is not None:
            connection = self._container.vector_connection()
            try:
                # Every model's collection, as the reconciler counts them (a re-embedding leaves
                # two): the same figure as the embedded backup's last pass records.
                models = sorted({stored, *connection.models()})
                points, counted_at = sum(connection.store(*m).count() for m in models), utc_now()
            finally:
                connection.close()
        # The owner's last census (Redis): a primary wiped since is told now, not after a pass.
        with translated_errors():
            kept = census.load(self._redis)
        if points is None and kept is not None:
            points, counted_at = kept.points, datetime.fromisoformat(kept.counted_at)
        share = self.settings.reconcile_min_primary_share
        lost = identity.primary_lost or census.looks_lost(kept, identity.memories, identity.store_id, share)
        return {
            "qdrant": self._backup(),
            "neo4j_memories": identity.memories,
            "qdrant_points": points,
            "qdrant_points_counted_at": counted_at,
            "store_id": identity.store_id,
            "primary_lost": lost,
        }

    def _backup(self) -> str:
        """Which backup the counts are of: the server's address, or the embedded folder."""
        if self.settings.qdrant_url is not None:
            return f"server {self.settings.qdrant_url}"
        return f"embedded {embedded_folder(self.settings)}"

    def tenant_overview(self, user_id: str) -> TenantOverview:
        """One tenant's documents and memories, and how far Qdrant has them."""
        return self._store().tenant_overview(user_id)
