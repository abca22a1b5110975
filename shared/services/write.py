"""Stage 3: write a staged batch to Neo4j at each document's version, then sync Qdrant from it.

Neo4j failing for a reason that will pass (it is down) fails the batch, to be retried whole:
every write is a MERGE on stable ids guarded by versions. Neo4j refusing a document (a value it
cannot store) fails that document alone: the batch is written again one document at a time and
only the refused ones are recorded failed. Qdrant failing never fails the batch: its Memories
are recorded ``failed`` for the reconciler.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from shared.errors import PermanentError, StagingMissing
from shared.services.refs import DocRef, ProgressLog
from shared.services.sync import Syncer, SyncOutcome
from shared.staging import Staging
from shared.stores.base import DocumentWrite, GraphStore, WriteOutcome

log = logging.getLogger(__name__)


@dataclass(slots=True)
class WriteReport:
    already_written: bool = False
    written: int = 0
    stale: int = 0
    failed: int = 0
    memories: int = 0
    removed: int = 0
    sync: SyncOutcome = field(default_factory=SyncOutcome)


class WriteStage:
    def __init__(self, graph: GraphStore, syncer: Syncer, staging: Staging, progress: ProgressLog) -> None:
        self._graph = graph
        self._syncer = syncer
        self._staging = staging
        self._progress = progress

    def run(self, batch_id: str) -> WriteReport:
        documents = self._staging.documents(batch_id)
        chunks = sum(len(doc.chunks) for doc in documents) if documents is not None else 0
        staged_vectors = self._staging.vectors(batch_id, chunks) if documents is not None else None
        if documents is None or staged_vectors is None:
            if self._staging.is_finished(batch_id):
                log.info("batch %s was already written; redelivery ignored", batch_id)
                return WriteReport(already_written=True)
            raise StagingMissing(f"batch {batch_id} has no staged documents or vectors to write")
        model, vectors = staged_vectors
        self._graph.ensure_schema(model, int(vectors.shape[1]))
        excluded = self._staging.excluded(batch_id)
        writes: list[DocumentWrite] = []
        position = 0
        for doc in documents:
            count = len(doc.chunks)
            if doc.key not in excluded:  # refused by the embedder, already recorded failed
                writes.append(DocumentWrite(doc, vectors[position : position + count].tolist(), model))
            position += count

        outcome, refused = self._write_isolating(writes)
        report = WriteReport(
            written=len(outcome.written),
            stale=len(outcome.stale),
            failed=len(refused),
            memories=len(outcome.memory_ids),
            removed=len(outcome.removed_ids),
        )
        report.sync = self._syncer.sync(outcome.memory_ids + outcome.removed_ids)
        versions = {doc.key: doc.version for doc in documents}
        # A stale document is done too: a newer version of it is (or will be) what is stored.
        self._progress.set(
            [(key, versions[key]) for key in outcome.written + outcome.stale], "done", batch=batch_id
        )
        for ref, reason in refused:
            self._progress.set([ref], "failed", f"write: {reason}", batch=batch_id)
        self._staging.finish(batch_id)
        return report

    def _write_isolating(
        self, writes: Sequence[DocumentWrite]
    ) -> tuple[WriteOutcome, list[tuple[DocRef, str]]]:
        try:
            return self._graph.write_documents(writes), []
        except PermanentError as exc:
            if len(writes) == 1:
                return WriteOutcome(), [((writes[0].staged.key, writes[0].staged.version), str(exc))]
        log.warning("batch refused by Neo4j; writing its %d documents one by one", len(writes))
        merged = WriteOutcome()
        refused: list[tuple[DocRef, str]] = []
        for write in writes:
            try:
                one = self._graph.write_documents([write])
            except PermanentError as exc:
                refused.append(((write.staged.key, write.staged.version), str(exc)))
                continue
            merged.written.extend(one.written)
            merged.stale.extend(one.stale)
            merged.memory_ids.extend(one.memory_ids)
            merged.removed_ids.extend(one.removed_ids)
        return merged, refused
