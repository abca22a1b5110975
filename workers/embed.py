"""Stage 2, queue ``embed``: embed a staged batch's chunks in model-sized batches."""

from __future__ import annotations

from typing import Any

from celery import Task

from shared.errors import StagingMissing
from workers import runtime
from workers.app import EMBED_TASK, WRITE_TASK, app
from workers.failures import recording_failure, retry_policy


@app.task(name=EMBED_TASK, **retry_policy())
def embed_batch(self: Task, batch_id: str) -> dict[str, Any]:
    documents = runtime.staging().documents(batch_id)
    if documents is None:
        raise StagingMissing(f"batch {batch_id} has no staged documents to embed")
    keys = [doc.key for doc in documents]
    with recording_failure(self, keys):
        texts = [chunk.content for doc in documents for chunk in doc.chunks]
        embedder = runtime.embedder()
        vectors = embedder.embed(texts)
        runtime.staging().put_vectors(batch_id, embedder.model_name, vectors)
        runtime.progress().set(keys, "writing")
        app.send_task(WRITE_TASK, args=(batch_id,))
    return {"batch_id": batch_id, "chunks": len(texts)}
