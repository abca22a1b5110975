"""Stage 2: embed a staged batch's chunks, slice by slice, staging each slice as it is done.

A text the embedder refuses (an HTTP backend's 4xx) fails its document alone: the slice is
embedded text by text, and the refused documents are recorded failed and left out of the write.
A task that is killed, or that reaches its time budget, leaves the slices it finished in staging:
the next run (a redelivery, or the continuation the task sends itself) embeds only the rest, so
a batch of any size is embedded in tasks that each stay well inside the time limit.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from shared.embedding.base import Embedder, Vectors
from shared.errors import PermanentError, StagingMissing
from shared.services.refs import DocRef, ProgressLog
from shared.staging import Staging

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class EmbedResult:
    complete: bool
    chunks: int
    embedded_now: int
    already_written: bool = False
    """A redelivered message of a batch whose write already finished: nothing to do or send."""


class EmbedStage:
    def __init__(self, embedder: Embedder, staging: Staging, progress: ProgressLog, slice_size: int) -> None:
        self._embedder = embedder
        self._staging = staging
        self._progress = progress
        self._slice = slice_size

    def run(self, batch_id: str, deadline: float) -> EmbedResult:
        """Embeds what is not staged yet, stopping between slices once ``deadline`` (monotonic) passed."""
        documents = self._staging.documents(batch_id)
        if documents is None:
            if self._staging.is_finished(batch_id):
                log.info("batch %s was already written; redelivery ignored", batch_id)
                return EmbedResult(complete=True, chunks=0, embedded_now=0, already_written=True)
            raise StagingMissing(f"batch {batch_id} has no staged documents to embed")
        texts = [chunk.content for doc in documents for chunk in doc.chunks]
        owners = [(doc.key, doc.version) for doc in documents for _ in doc.chunks]
        done = self._staging.vector_slices(batch_id)
        embedded = 0
        for start in range(0, len(texts), self._slice):
            if start in done:
                continue
            if embedded and time.monotonic() > deadline:
                return EmbedResult(complete=False, chunks=len(texts), embedded_now=embedded)
            part = texts[start : start + self._slice]
            try:
                vectors = self._embedder.embed(part)
            except PermanentError as exc:
                log.warning(
                    "embedder refused a slice of batch %s (%s); embedding it text by text", batch_id, exc
                )
                vectors = self._embed_one_by_one(batch_id, part, owners[start : start + self._slice])
            self._staging.put_vector_slice(batch_id, start, self._embedder.model_name, vectors)
            embedded += len(vectors)
        excluded = self._staging.excluded(batch_id)
        self._progress.set(
            [(d.key, d.version) for d in documents if d.key not in excluded], "writing", batch=batch_id
        )
        return EmbedResult(complete=True, chunks=len(texts), embedded_now=embedded)

    def _embed_one_by_one(self, batch_id: str, texts: list[str], owners: list[DocRef]) -> Vectors:
        """A refused text fails its document alone: its row stays zero, its document is excluded."""
        rows: list[Vectors | None] = []
        refused: dict[DocRef, str] = {}
        for text, owner in zip(texts, owners, strict=True):
            try:
                rows.append(self._embedder.embed([text]))
            except PermanentError as exc:
                rows.append(None)
                refused.setdefault(owner, str(exc))
        dimension = next((row.shape[1] for row in rows if row is not None), self._embedder.dimension)
        zero = np.zeros((1, dimension), dtype=np.float32)
        self._staging.exclude(batch_id, [key for key, _ in refused])
        for owner, reason in refused.items():
            self._progress.set([owner], "failed", f"embed: {reason}", batch=batch_id)
        return np.concatenate([zero if row is None else row for row in rows])
