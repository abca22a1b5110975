"""Stage 2: embed a staged batch's chunks, slice by slice, staging each slice as it is done.

A text the embedder refuses (an HTTP backend's 4xx) fails its document alone: the slice is
embedded text by text, and the refused documents are recorded failed and left out of the write.
A task that is killed, or that reaches its time budget, leaves the slices it finished in staging:
the next run (a redelivery, or the continuation the task sends itself) embeds only the rest, so
a batch of any size is embedded in tasks that each stay well inside the time limit.

A chunk whose text its document's stored version already holds, embedded by this model, takes
that stored vector (``StoredVectors``) rather than going to the embedder: re-ingesting a
document with one paragraph edited embeds only the chunks that changed, and a change of its
metadata alone embeds nothing. The same text and model give the same vector, so the stored one is
the one the embedder would make.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from shared.embedding.base import Embedder, Vectors
from shared.errors import PermanentError, ServiceUnavailable, StagingMissing, TransientError
from shared.models import StagedDocument
from shared.services.refs import DocRef, ProgressLog
from shared.staging import Staging

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class EmbedResult:
    complete: bool
    chunks: int
    embedded_now: int
    reused: int = 0
    """Chunks of the batch that took their stored vector instead of being embedded."""
    already_written: bool = False
    """A redelivered message of a batch whose write already finished: nothing to do or send."""
    model_cpu_s: float = 0.0
    """CPU-seconds of this process inside the embedder's calls: the model's own cost where it runs
    in-process (the local backend), so what the stage spends around it is the rest of its process's
    CPU. Exact where a process runs one task at a time (the prefork pool ops/ and compose run)."""


class StoredVectors(Protocol):
    """The vectors a store holds for documents' current chunks (``shared.stores.neo4j_incremental``)."""

    def stored_vectors(
        self, wanted: Mapping[str, set[str]], model: str
    ) -> dict[tuple[str, str], list[float]]:
        """Per (document key, chunk content hash) of ``wanted`` (hashes by document key), the vector
        of that document's stored chunk of that text, embedded by ``model``."""
        ...


class EmbedStage:
    def __init__(
        self,
        embedder: Embedder,
        staging: Staging,
        progress: ProgressLog,
        slice_size: int,
        stored: StoredVectors | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._embedder = embedder
        self._staging = staging
        self._progress = progress
        self._slice = slice_size
        self._stored = stored
        self._clock = clock

    def run(self, batch_id: str, deadline: float, retries: int = 0) -> EmbedResult:
        """Embeds what is not staged yet, stopping between slices before one that would end past
        ``deadline`` (monotonic), judged by the longest slice of this run so far: a slice cut short
        by the task's soft time limit loses its work, and on a loaded machine that was most of it
        (``engram bench``: the embed worker spent 485 CPU-s on 2,075 chunks, ~4x the model's cost).

        A retried task (``retries``) takes slices half as long per retry: on a machine loaded enough
        that one slice outlasts the task's time limit, every try alike would fail the batch for good,
        where smaller slices are staged one by one and the batch moves on."""
        documents = self._staging.documents(batch_id)
        if documents is None:
            if self._staging.is_finished(batch_id):
                log.info("batch %s was already written; redelivery ignored", batch_id)
                return EmbedResult(complete=True, chunks=0, embedded_now=0, already_written=True)
            raise StagingMissing(f"batch {batch_id} has no staged documents to embed")
        texts = [chunk.content for doc in documents for chunk in doc.chunks]
        owners = [(doc.key, doc.version) for doc in documents for _ in doc.chunks]
        done = self._staging.vector_slices(batch_id)
        gaps = _gaps({start: len(part) for start, (_, part) in done.items()}, len(texts))
        remaining = bool(gaps)
        reused = self._reusable(documents) if remaining else {}
        embedded = 0
        model_cpu = 0.0
        size = max(1, self._slice >> min(retries, 16))
        slices = [range(s, min(s + size, end)) for begin, end in gaps for s in range(begin, end, size)]
        longest = 0.0
        for positions in slices:
            began = self._clock()
            if embedded and began + longest > deadline:
                return EmbedResult(
                    complete=False, chunks=len(texts), embedded_now=embedded, model_cpu_s=model_cpu
                )
            start = positions.start
            fresh = [i for i in positions if i not in reused]
            cpu_before = time.process_time()
            vectors = self._embed(batch_id, [texts[i] for i in fresh], [owners[i] for i in fresh])
            model_cpu += time.process_time() - cpu_before
            rows = dict(zip(fresh, vectors, strict=True))
            dimension = vectors.shape[1] if fresh else len(reused[start])
            part = np.zeros((len(positions), dimension), dtype=np.float32)
            for row, i in enumerate(positions):
                part[row] = rows[i] if i in rows else reused[i]
            self._staging.put_vector_slice(batch_id, start, self._embedder.model_name, part)
            embedded += len(fresh)
            longest = max(longest, self._clock() - began)
        excluded = self._staging.excluded(batch_id)
        written = [d for d in documents if d.key not in excluded]
        if remaining:  # else a redelivery of a batch embedded whole: its counts are recorded
            self._count(documents, written, reused)
        self._progress.set([(d.key, d.version) for d in written], "writing", batch=batch_id)
        return EmbedResult(
            complete=True, chunks=len(texts), embedded_now=embedded, reused=len(reused), model_cpu_s=model_cpu
        )

    def _embed(self, batch_id: str, texts: list[str], owners: list[DocRef]) -> Vectors:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        try:
            return self._embedder.embed(texts)
        except PermanentError as exc:
            log.warning("embedder refused a slice of batch %s (%s); embedding it text by text", batch_id, exc)
            return self._embed_one_by_one(batch_id, texts, owners)

    def _reusable(self, documents: list[StagedDocument]) -> dict[int, list[float]]:
        """By the chunk's place in the batch, the stored vectors its chunks can take. Without the
        store (Neo4j unreachable) nothing is reused: the embedder makes them all, as before."""
        if self._stored is None:
            return {}
        wanted = {doc.key: {chunk.content_hash for chunk in doc.chunks} for doc in documents if not doc.force}
        try:
            found = self._stored.stored_vectors(wanted, self._embedder.model_name)
        except (ServiceUnavailable, TransientError) as exc:
            log.warning("stored vectors unreadable (%s); embedding every chunk", exc)
            return {}
        reusable: dict[int, list[float]] = {}
        position = 0
        for doc in documents:
            for chunk in doc.chunks:
                vector = found.get((doc.key, chunk.content_hash))
                if vector is not None:
                    reusable[position] = vector
                position += 1
        return reusable

    def _count(
        self, documents: list[StagedDocument], written: list[StagedDocument], reused: dict[int, list[float]]
    ) -> None:
        """Each document's chunks reused and embedded, on its progress record."""
        first: dict[str, int] = {}
        position = 0
        for doc in documents:
            first[doc.key] = position
            position += len(doc.chunks)
        counts = []
        for doc in written:
            start = first[doc.key]
            taken = sum(1 for i in range(start, start + len(doc.chunks)) if i in reused)
            counts.append((doc.key, doc.version, taken, len(doc.chunks) - taken))
        self._progress.set_counts(counts)

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


def _gaps(staged: dict[int, int], total: int) -> list[tuple[int, int]]:
    """The (start, end) ranges of chunks no staged slice covers, walking the slices from chunk 0 as
    ``Staging.vectors`` reads them (each slice by its first chunk and its length): slices staged by
    earlier tries, of whatever length, are kept, and a gap ends where the next staged slice begins."""
    gaps: list[tuple[int, int]] = []
    position = 0
    while position < total:
        if staged.get(position, 0) > 0:
            position += staged[position]
            continue
        after = [start for start in staged if start > position]
        end = min([*after, total])
        gaps.append((position, end))
        position = end
    return gaps
