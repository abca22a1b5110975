"""Stage 1, queue ``ingest``: chunk documents with the model's own tokenizer and stage them."""

from __future__ import annotations

from typing import Any

from celery import Task
from pydantic import ValidationError

from shared.errors import InvalidInput
from shared.ids import content_hash, document_key, memory_id
from shared.models import ChunkRecord, DocumentIn, StagedDocument, utc_now
from workers import runtime
from workers.app import CHUNK_TASK, EMBED_TASK, app
from workers.failures import recording_failure, retry_policy


def stage_document(document: DocumentIn) -> StagedDocument:
    doc_id = document.document_id
    chunks = [
        ChunkRecord(
            id=memory_id(document.user_id, doc_id, index),
            chunk_index=index,
            content=chunk.text,
            content_hash=content_hash(chunk.text),
            token_count=chunk.token_count,
        )
        for index, chunk in enumerate(runtime.chunker().chunk(document.text))
    ]
    if not chunks:
        raise InvalidInput(f"document {doc_id!r} has no text to chunk")
    return StagedDocument(
        document=document,
        key=document_key(document.user_id, doc_id),
        content_hash=content_hash(document.text),
        received_at=utc_now(),
        chunks=chunks,
    )


@app.task(name=CHUNK_TASK, **retry_policy())
def chunk_documents(self: Task, documents: list[dict[str, Any]]) -> dict[str, Any]:
    """The batch id is this task's id, so a redelivered message re-stages the same batch."""
    batch_id: str = self.request.id
    try:
        parsed = [DocumentIn.model_validate(doc) for doc in documents]
    except ValidationError as exc:
        raise InvalidInput(f"ingest batch {batch_id} is malformed: {exc}") from exc
    keys = [document_key(doc.user_id, doc.document_id) for doc in parsed]
    with recording_failure(self, keys):
        runtime.progress().set(keys, "chunking")
        staged = [stage_document(doc) for doc in parsed]
        runtime.staging().put_documents(batch_id, staged)
        runtime.progress().set(keys, "embedding")
        app.send_task(EMBED_TASK, args=(batch_id,))
    return {
        "batch_id": batch_id,
        "documents": len(staged),
        "chunks": sum(len(d.chunks) for d in staged),
    }
