"""Stage 2: embed a staged batch's chunks, slice by slice, staging each slice as it is done.

A task that is killed, or that reaches its time budget, leaves the slices it finished in staging:
the next run (a redelivery, or the continuation the task sends itself) embeds only the rest, so
a batch of any size is embedded in tasks that each stay well inside the time limit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from shared.embedding.base import Embedder
from shared.errors import StagingMissing
from shared.services.refs import ProgressLog
from shared.staging import Staging


@dataclass(frozen=True, slots=True)
class EmbedResult:
    complete: bool
    chunks: int
    embedded_now: int


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
            raise StagingMissing(f"batch {batch_id} has no staged documents to embed")
        texts = [chunk.content for doc in documents for chunk in doc.chunks]
        done = self._staging.vector_slices(batch_id)
        embedded = 0
        for start in range(0, len(texts), self._slice):
            if start in done:
                continue
            if embedded and time.monotonic() > deadline:
                return EmbedResult(complete=False, chunks=len(texts), embedded_now=embedded)
            vectors = self._embedder.embed(texts[start : start + self._slice])
            self._staging.put_vector_slice(batch_id, start, self._embedder.model_name, vectors)
            embedded += len(vectors)
        self._progress.set([(doc.key, doc.version) for doc in documents], "writing", batch=batch_id)
        return EmbedResult(complete=True, chunks=len(texts), embedded_now=embedded)
