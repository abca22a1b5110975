"""Stage 3, queue ``write``: Neo4j first, at each document's version, then Qdrant synced from it.

Also on this queue, because in embedded mode only the process that owns the Qdrant folder may
write to it: syncing given Memory ids (a delete's removed Memories), and a model migration's
pages (``engram reembed``) and the dropping of its old collection.
"""

from __future__ import annotations

from typing import Any

from celery import Task

from workers.app import DROP_COLLECTION_TASK, REEMBED_TASK, SYNC_TASK, WRITE_TASK, app
from workers.stage import StageTask, container, retrying


@app.task(name=WRITE_TASK, base=StageTask, bind=True)
def write_batch(
    self: StageTask, batch_id: str, documents: list[list[Any]], failing_since: float | None = None
) -> dict[str, Any]:
    with retrying(self):
        report = container().write_stage.run(batch_id)
    return {
        "batch_id": batch_id,
        "already_written": report.already_written,
        "written": report.written,
        "stale": report.stale,
        "failed": report.failed,
        "memories": report.memories,
        "removed": report.removed,
        "synced": report.sync.synced,
        "sync_failed": report.sync.failed,
    }


@app.task(name=SYNC_TASK, bind=True)
def sync_memories(self: Task, ids: list[str]) -> dict[str, Any]:
    """Brings these Memories' points level with Neo4j; what fails stays recorded for the reconciler."""
    outcome = container().syncer.sync(ids)
    return {
        "synced": outcome.synced,
        "deleted": outcome.deleted,
        "failed": outcome.failed,
        "error": outcome.error,
    }


@app.task(name=REEMBED_TASK, bind=True, max_retries=None)
def reembed_page(self: Task, run: int, ids: list[str], failing_since: float | None = None) -> dict[str, Any]:
    """Re-embeds one page of Memories with the migration's target model (shared/services/reembed.py)."""
    with retrying(self):
        report = container().reembed_pages.run(run, ids)
    return {
        "stale": report.stale,
        "reembedded": report.reembedded,
        "synced": report.synced,
        "superseded": report.superseded,
    }


@app.task(name=DROP_COLLECTION_TASK)
def drop_collection(model: str, dimension: int) -> dict[str, Any]:
    return {"dropped": container().qdrant.drop(model, dimension)}
