"""Stage 3, queue ``write``: Neo4j first, then Qdrant, with ``vector_sync`` on every Memory.

Neo4j failing means the batch is retried whole (every write is a MERGE on stable ids); Qdrant
failing means the Memories are recorded ``failed`` and the reconciler finishes them later.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Task

from shared.errors import StagingMissing
from shared.vector_sync import finish_deletes, push_memories
from workers import runtime
from workers.app import WRITE_TASK, app
from workers.failures import recording_failure, retry_policy

log = logging.getLogger(__name__)


@app.task(name=WRITE_TASK, **retry_policy())
def write_batch(self: Task, batch_id: str) -> dict[str, Any]:
    staging = runtime.staging()
    documents = staging.documents(batch_id)
    staged_vectors = staging.vectors(batch_id)
    if documents is None or staged_vectors is None:
        if staging.is_finished(batch_id):
            log.info("batch %s was already written; redelivery ignored", batch_id)
            return {"batch_id": batch_id, "already_written": True}
        raise StagingMissing(f"batch {batch_id} has no staged documents or vectors to write")
    model, vectors = staged_vectors
    keys = [doc.key for doc in documents]
    with recording_failure(self, keys):
        dimension = int(vectors.shape[1])
        neo4j = runtime.neo4j_with_schema(model, dimension)
        written = neo4j.write_documents(documents, vectors.tolist(), model)
        qdrant = runtime.qdrant(model, dimension)
        pushed = push_memories(neo4j, qdrant, written.memories)
        deleted = finish_deletes(neo4j, qdrant, written.removed_ids)
        runtime.progress().set(keys, "done")
        staging.finish(batch_id)
    return {
        "batch_id": batch_id,
        "memories": len(written.memories),
        "synced": pushed.synced,
        "failed": pushed.failed,
        "removed": len(written.removed_ids),
        "deleted_from_qdrant": deleted.deleted,
    }
