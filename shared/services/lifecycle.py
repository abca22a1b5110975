"""The memory lifecycle: read, list, update and delete memories and documents, in both stores.

Every call is scoped to one tenant. A delete is a versioned write: it takes a new version, so a
write of the same document accepted before it and arriving after it is a no-op, and one
accepted after it wins. It removes the Memories from Neo4j at once (so from search at once),
leaves tombstones, and asks for their points to be dropped from Qdrant; the result says whether
Qdrant confirmed, and an unconfirmed delete stays recorded until the reconciler finishes it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from shared.errors import InvalidInput
from shared.ids import document_key
from shared.models import DeleteResult, MemoryPage, MemoryRecord, SearchFilters
from shared.stores.base import GraphStore

SyncRemoved = Callable[[Sequence[str]], bool]
"""Drops these ids' points from Qdrant (through whichever process owns it); True if confirmed."""


class Lifecycle:
    def __init__(self, graph: GraphStore, next_version: Callable[[], int], sync_removed: SyncRemoved) -> None:
        self._graph = graph
        self._next_version = next_version
        self._sync_removed = sync_removed

    def get_memory(self, user_id: str, memory_id: str) -> MemoryRecord | None:
        return self._graph.get_memory(user_id, memory_id)

    def list_memories(
        self, user_id: str, filters: SearchFilters, limit: int, cursor: str | None = None
    ) -> MemoryPage:
        if not 1 <= limit <= 1000:
            raise InvalidInput(f"limit must be between 1 and 1000, not {limit}")
        memories = self._graph.list_memories(user_id, filters, cursor, limit)
        next_cursor = memories[-1].id if len(memories) == limit else None
        return MemoryPage(memories=memories, next_cursor=next_cursor)

    def delete_document(self, user_id: str, document_id: str) -> DeleteResult:
        version = self._next_version()
        removed = self._graph.delete_documents([document_key(user_id, document_id)], version)
        return self._finish(version, removed, documents=1 if removed else 0)

    def delete_memory(self, user_id: str, memory_id: str) -> DeleteResult:
        return self._delete(user_id, SearchFilters(), [memory_id])

    def delete_where(self, user_id: str, filters: SearchFilters, everything: bool = False) -> DeleteResult:
        """Deletes the tenant's Memories matching the filters; with no filter, only if asked for
        ``everything`` — never by accident."""
        if not everything and filters == SearchFilters():
            raise InvalidInput("no filter given: name one, or ask for everything of the tenant explicitly")
        return self._delete(user_id, filters, None)

    def _delete(self, user_id: str, filters: SearchFilters, ids: list[str] | None) -> DeleteResult:
        version = self._next_version()
        removed, documents = self._graph.delete_memories(user_id, filters, ids, version)
        return self._finish(version, removed, documents)

    def _finish(self, version: int, removed: list[str], documents: int) -> DeleteResult:
        result = DeleteResult(version=version, memories=len(removed), documents=documents)
        if removed:
            result.qdrant_confirmed = self._sync_removed(removed)
        return result
