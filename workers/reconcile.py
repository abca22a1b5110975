"""Queue ``reconcile``: finishes what the write worker could not, on a schedule and on demand.

Re-syncs Memories ``pending`` for longer than the grace period and every ``failed`` one, in bulk
batches, and finishes recorded deletes. A dry run only counts. It stops at the first batch that
fails (Qdrant is down: the next run will try again) rather than marking everything failed twice.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from shared.models import utc_now
from shared.vector_sync import finish_deletes, push_memories
from workers import runtime
from workers.app import RECONCILE_TASK, app


@app.task(name=RECONCILE_TASK)
def run(dry_run: bool = False) -> dict[str, Any]:
    settings = runtime.settings()
    neo4j = runtime.neo4j()
    cutoff = utc_now() - timedelta(seconds=settings.reconcile_grace_s)
    backlog, tombstones = neo4j.resync_backlog(cutoff)
    report: dict[str, Any] = {
        "dry_run": dry_run,
        "to_resync": backlog,
        "to_delete": tombstones,
        "resynced": 0,
        "still_failed": 0,
        "deleted": 0,
        "error": None,
        "vector_sync": None,
    }
    if not dry_run:
        _resync(report, cutoff)
        _finish_deletes(report)
    report["vector_sync"] = neo4j.vector_sync_counts().model_dump()
    return report


def _resync(report: dict[str, Any], cutoff: datetime) -> None:
    settings = runtime.settings()
    neo4j = runtime.neo4j()
    for _ in range(report["to_resync"] // settings.reconcile_batch_size + 1):
        memories = neo4j.memories_to_resync(cutoff, settings.reconcile_batch_size)
        if not memories:
            return
        model, dimension = memories[0]["embedding_model"], int(memories[0]["embedding_dim"])
        same_model = [m for m in memories if m["embedding_model"] == model]
        outcome = push_memories(neo4j, runtime.qdrant(model, dimension), same_model)
        report["resynced"] += outcome.synced
        if outcome.error:
            report["still_failed"] += outcome.failed
            report["error"] = outcome.error
            return


def _finish_deletes(report: dict[str, Any]) -> None:
    settings = runtime.settings()
    neo4j = runtime.neo4j()
    schema = neo4j.stored_model()
    if schema is None:
        return
    store = runtime.qdrant(*schema)
    for _ in range(report["to_delete"] // settings.reconcile_batch_size + 1):
        ids = neo4j.tombstones(settings.reconcile_batch_size)
        if not ids:
            return
        outcome = finish_deletes(neo4j, store, ids)
        report["deleted"] += outcome.deleted
        if outcome.error:
            report["error"] = outcome.error
            return
