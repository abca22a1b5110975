"""The task names and queues, defined once: the Celery app (workers/app.py) routes them, producers
send them, and the metrics (shared/metrics.py) label each by its stage.

Here, in ``shared``, because the metrics and the workers both read them and ``shared`` imports
nothing of ``workers``.
"""

from __future__ import annotations

INGEST, EMBED, WRITE, QUERY, RECONCILE = "ingest", "embed", "write", "query", "reconcile"
FALLBACK = "fallback"
"""Searches of the embedded Qdrant folder, served by its owner (the write worker) for query workers."""
QUEUES = (INGEST, EMBED, WRITE, QUERY, RECONCILE, FALLBACK)

CHUNK_TASK = "engram.ingest.chunk_documents"
EMBED_TASK = "engram.embed.embed_batch"
WRITE_TASK = "engram.write.write_batch"
SYNC_TASK = "engram.write.sync_memories"
REEMBED_TASK = "engram.write.reembed_page"
DROP_COLLECTION_TASK = "engram.write.drop_collection"
SEARCH_TASK = "engram.query.search"
FALLBACK_TASK = "engram.fallback.search"
RECONCILE_TASK = "engram.reconcile.run"
RESTORE_TASK = "engram.reconcile.restore"

ROUTES: dict[str, str] = {
    CHUNK_TASK: INGEST,
    EMBED_TASK: EMBED,
    WRITE_TASK: WRITE,
    SYNC_TASK: WRITE,
    REEMBED_TASK: WRITE,
    DROP_COLLECTION_TASK: WRITE,
    SEARCH_TASK: QUERY,
    FALLBACK_TASK: FALLBACK,
    RECONCILE_TASK: RECONCILE,
    RESTORE_TASK: RECONCILE,
}
"""The queue of each task: one per stage; only Qdrant's other writers share the write queue
(embedded Qdrant has one owner), and the restore shares the reconciler's."""

STAGE_QUEUES = {CHUNK_TASK: INGEST, EMBED_TASK: EMBED, WRITE_TASK: WRITE}
"""The stage tasks, whose messages the ledger keeps until their task has ended (shared/ledger.py)."""

STAGES: dict[str, str] = {
    CHUNK_TASK: "chunk",
    EMBED_TASK: "embed",
    WRITE_TASK: "write",
    SYNC_TASK: "sync",
    REEMBED_TASK: "reembed",
    DROP_COLLECTION_TASK: "drop_collection",
    SEARCH_TASK: "search",
    FALLBACK_TASK: "fallback",
    RECONCILE_TASK: "reconcile",
    RESTORE_TASK: "restore",
}
"""The stage of each task: the label its metrics carry."""

__all__ = [
    "CHUNK_TASK",
    "DROP_COLLECTION_TASK",
    "EMBED",
    "EMBED_TASK",
    "FALLBACK",
    "FALLBACK_TASK",
    "INGEST",
    "QUERY",
    "QUEUES",
    "RECONCILE",
    "RECONCILE_TASK",
    "REEMBED_TASK",
    "RESTORE_TASK",
    "ROUTES",
    "SEARCH_TASK",
    "STAGES",
    "STAGE_QUEUES",
    "SYNC_TASK",
    "WRITE",
    "WRITE_TASK",
]
