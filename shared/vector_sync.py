"""Bringing Qdrant level with Neo4j, and recording on each Memory how far that got.

Used by the write worker right after its Neo4j write and by the reconciler for whatever that could
not finish. A Qdrant failure never undoes or blocks the Neo4j write: it is recorded as ``failed``
(with the error and an attempt count) for the reconciler to repair.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.errors import ServiceUnavailable
from shared.stores.base import VectorPoint, VectorStore
from shared.stores.neo4j import Neo4jStore

log = logging.getLogger(__name__)

# Fields of a Memory that are state of the sync itself, not of the memory: kept out of the payload.
_NOT_PAYLOAD = {
    "embedding",
    "vector_sync",
    "vector_sync_error",
    "vector_sync_attempts",
    "vector_synced_at",
}


@dataclass(frozen=True, slots=True)
class SyncOutcome:
    synced: int = 0
    failed: int = 0
    deleted: int = 0
    error: str | None = None


def payload_of(memory: dict[str, Any]) -> dict[str, Any]:
    """The Qdrant payload of a Memory: its fields without the vector, datetimes as ISO text."""
    return {
        key: value.isoformat() if isinstance(value, datetime) else value
        for key, value in memory.items()
        if key not in _NOT_PAYLOAD
    }


def push_memories(neo4j: Neo4jStore, vectors: VectorStore, memories: Sequence[dict[str, Any]]) -> SyncOutcome:
    """Upserts Memories (each with its ``embedding``) into Qdrant and marks them synced or failed."""
    if not memories:
        return SyncOutcome()
    points = [VectorPoint(m["id"], m["embedding"], payload_of(m)) for m in memories]
    try:
        vectors.upsert(points)
    except ServiceUnavailable as exc:
        log.warning("qdrant upsert of %d memories failed: %s", len(points), exc)
        neo4j.mark_failed([m["id"] for m in memories], str(exc))
        return SyncOutcome(failed=len(memories), error=str(exc))
    marked = neo4j.mark_synced(
        [
            {
                "id": m["id"],
                "content_hash": m["content_hash"],
                "embedding_model": m["embedding_model"],
            }
            for m in memories
        ]
    )
    return SyncOutcome(synced=marked)


def finish_deletes(neo4j: Neo4jStore, vectors: VectorStore, ids: Sequence[str]) -> SyncOutcome:
    """Deletes removed Memories' points; their tombstones go only once Qdrant confirmed."""
    if not ids:
        return SyncOutcome()
    try:
        vectors.delete(ids)
    except ServiceUnavailable as exc:
        log.warning("qdrant delete of %d points failed, tombstones kept: %s", len(ids), exc)
        return SyncOutcome(error=str(exc))
    neo4j.forget_tombstones(ids)
    return SyncOutcome(deleted=len(ids))
