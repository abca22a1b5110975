"""Stage 1: chunk a batch's documents with the model's own tokenizer and stage them.

A document the tokenizer reduces to nothing fails alone, with its reason; the rest of its batch
goes on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from shared.chunking import Chunker
from shared.errors import InvalidInput
from shared.ids import content_hash, document_key, memory_id
from shared.models import ChunkRecord, DocumentIn, StagedDocument, utc_now
from shared.services.refs import DocRef, ProgressLog
from shared.staging import Staging


@dataclass(frozen=True, slots=True)
class Accepted:
    """A document as a producer accepted it: its fields and the version it is written at."""

    document: DocumentIn
    version: int
    force: bool = False
    """Redo everything: no stored vector is reused (``engram ingest --force``)."""

    @property
    def ref(self) -> DocRef:
        return document_key(self.document.user_id, self.document.document_id), self.version


@dataclass(slots=True)
class ChunkResult:
    staged: list[DocRef] = field(default_factory=list)
    failed: list[DocRef] = field(default_factory=list)
    chunks: int = 0


class ChunkStage:
    def __init__(self, chunker: Chunker, staging: Staging, progress: ProgressLog) -> None:
        self._chunker = chunker
        self._staging = staging
        self._progress = progress

    def stage_document(self, accepted: Accepted) -> StagedDocument:
        document = accepted.document
        doc_id = document.document_id
        chunks = [
            ChunkRecord(
                id=memory_id(document.user_id, doc_id, index),
                chunk_index=index,
                content=chunk.text,
                content_hash=content_hash(chunk.text),
                token_count=chunk.token_count,
            )
            for index, chunk in enumerate(self._chunker.chunk(document.text))
        ]
        if not chunks:
            raise InvalidInput(f"document {doc_id!r} has no text the model can read")
        return StagedDocument(
            document=document,
            key=accepted.ref[0],
            version=accepted.version,
            content_hash=content_hash(document.text),
            received_at=utc_now(),
            chunks=chunks,
            force=accepted.force,
        )

    def run(self, batch_id: str, batch: Sequence[Accepted]) -> ChunkResult:
        result = ChunkResult()
        self._progress.set([a.ref for a in batch], "chunking", batch=batch_id)
        staged: list[StagedDocument] = []
        for accepted in batch:
            try:
                staged.append(self.stage_document(accepted))
            except InvalidInput as exc:
                self._progress.set([accepted.ref], "failed", f"chunk: {exc}", batch=batch_id)
                result.failed.append(accepted.ref)
        if staged:
            self._staging.put_documents(batch_id, staged)
            result.staged = [(doc.key, doc.version) for doc in staged]
            result.chunks = sum(len(doc.chunks) for doc in staged)
            self._progress.set(result.staged, "embedding", batch=batch_id)
        return result
