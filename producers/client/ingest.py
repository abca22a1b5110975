"""The broker client's ingest side: documents checked and enqueued (but those stored exactly as
given), their progress and status, their deletion, and the replay of failed ones."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence

from producers.client.base import ClientBase, batches, check_document, queue_errors
from producers.client.waiting import load_state
from shared.errors import DuplicateDocument, InvalidInput, ServiceUnavailable, TransientError
from shared.ids import document_key
from shared.models import (
    FINAL_STATES,
    DeleteResult,
    DocumentIn,
    DocumentStatus,
    IngestAccepted,
    SearchFilters,
    VectorSyncCounts,
)
from shared.services.incremental import Change, classify_all
from shared.services.refs import DocRef
from shared.services.replay import Replay, ReplayReport, Stage
from shared.stores.neo4j_incremental import StoredState
from workers.app import CHUNK_TASK, EMBED_TASK, WRITE_TASK, send_stage

log = logging.getLogger(__name__)


class Ingest(ClientBase):
    def ingest(
        self, documents: Sequence[DocumentIn], batch_documents: int | None = None, force: bool = False
    ) -> IngestAccepted:
        """Checks every document first, so a bad one enqueues nothing, then enqueues in batches,
        every document at one new version. A document stored exactly as given is not enqueued
        (``unchanged``) unless ``force``."""
        if not documents:
            raise InvalidInput("no documents given")
        self.ping()
        seen: set[str] = set()
        for document in documents:
            check_document(document, self.settings)
            key = document_key(document.user_id, document.document_id)
            if key in seen:
                raise DuplicateDocument(f"document {document.document_id!r} appears twice in one request")
            seen.add(key)
        unchanged = {} if force else self._unchanged(documents)
        version = self._versions.next()
        size = batch_documents or self.settings.ingest_batch_documents
        task_ids: list[str] = []
        sent = 0
        todo = [d for d in documents if document_key(d.user_id, d.document_id) not in unchanged]
        skipped = [d.document_id for d in documents if document_key(d.user_id, d.document_id) in unchanged]
        for batch in batches(todo, size, max(self.settings.max_document_bytes, 256_000)):
            payload = [{**d.model_dump(mode="json", exclude_none=True), "version": version} for d in batch]
            if force:  # every stage redoes its work: the embed stage reuses no stored vector
                payload = [{**fields, "force": True} for fields in payload]
            try:
                with queue_errors():
                    task_ids.append(send_stage(self._app, self._ledger, CHUNK_TASK, (payload,)))
            except ServiceUnavailable as exc:
                raise ServiceUnavailable(
                    "redis", f"enqueued {sent} of {len(todo)} documents, then: {exc.detail}", exc.hint
                ) from exc
            sent += len(batch)
            # After the send: progress never moves backwards, so a worker already past "queued" stays.
            self._progress.set([(document_key(d.user_id, d.document_id), version) for d in batch], "queued")
            self._progress.name(
                (document_key(d.user_id, d.document_id), d.user_id, d.document_id, version) for d in batch
            )
        # At the stored version: a newer ingestion accepted meanwhile by another producer keeps its record.
        self._progress.set(list(unchanged.items()), "unchanged")
        self._progress.name(
            (key, d.user_id, d.document_id, unchanged[key])
            for d in documents
            if (key := document_key(d.user_id, d.document_id)) in unchanged
        )
        return IngestAccepted(
            accepted=len(documents),
            version=version,
            document_ids=[d.document_id for d in documents],
            task_ids=task_ids,
            unchanged=skipped,
        )

    def changes(self, documents: Sequence[DocumentIn]) -> tuple[list[Change], dict[str, StoredState]]:
        """Whether each document is new, changed or stored exactly as given (for this tenant), and
        the stored state of those stored, by document key."""
        keys = [document_key(d.user_id, d.document_id) for d in documents]
        stored: dict[str, StoredState] = {}
        for start in range(0, len(keys), 1000):
            stored.update(self._container.incremental.stored_states(keys[start : start + 1000]))
        records = self._progress.records(keys)
        return classify_all(documents, keys, stored, records, self.settings.embedding_model), stored

    def _unchanged(self, documents: Sequence[DocumentIn]) -> dict[str, int]:
        """The keys of documents stored exactly as given, with their stored version. Neo4j out of
        reach skips nothing: every document is enqueued, to be written once it is back."""
        try:
            changes, stored = self.changes(documents)
        except TransientError as exc:
            if isinstance(exc, ServiceUnavailable) and exc.service == "redis":
                raise
            log.warning("stored documents unreadable (%s); enqueueing every document", exc)
            return {}
        found: dict[str, int] = {}
        for document, change in zip(documents, changes, strict=True):
            if change == "unchanged":
                key = document_key(document.user_id, document.document_id)
                found[key] = stored[key].version
        return found

    def states(self, documents: Sequence[DocRef]) -> Counter[str]:
        """How many of these (key, version) are in each state (``waiting.load_state``): for progress
        over a bulk load."""
        return self.progress_of(documents)[0]

    def progress_of(self, documents: Sequence[DocRef]) -> tuple[Counter[str], list[DocRef]]:
        """``states``, and those of the documents not finished yet: done, failed and unchanged
        are final at a version, so a wait polls only the rest (``producers/client/waiting.py``)."""
        counts: Counter[str] = Counter()
        unfinished: list[DocRef] = []
        for ref, recorded in zip(documents, self._progress.states(k for k, _ in documents), strict=True):
            state = load_state(ref[1], recorded)
            counts[state] += 1
            if state not in FINAL_STATES:
                unfinished.append(ref)
        return counts, unfinished

    def chunk_work(self, documents: Sequence[DocRef]) -> tuple[int, int]:
        """(Chunks reused, chunks embedded) of these (key, version), as the embed stage recorded them."""
        reused = embedded = 0
        for (_, version), record in zip(
            documents, self._progress.records(k for k, _ in documents), strict=True
        ):
            if record is not None and record.version == version:
                reused += record.reused or 0
                embedded += record.embedded or 0
        return reused, embedded

    def source_documents(self, user_id: str, source: str) -> list[str]:
        """The ids of the tenant's stored documents whose source is ``source``."""
        return self._container.incremental.source_documents(user_id, source)

    def stored_documents(self, keys: Sequence[str]) -> int:
        """How many of these documents Neo4j holds."""
        return self._store().stored_documents(keys)

    def chunk_count(self, keys: Sequence[str]) -> int:
        """Chunks stored for these documents."""
        return self._store().chunk_count(keys)

    def status(self, user_id: str, document_id: str) -> DocumentStatus:
        key = document_key(user_id, document_id)
        progress = self._progress.get(key)
        stored = self._store().document_status(key)
        status = DocumentStatus(document_id=document_id, user_id=user_id, state="unknown")
        if progress is not None:
            status.state, status.error, status.updated_at = (
                progress.state,
                progress.error,
                progress.updated_at,
            )
            status.version = progress.version
            status.chunks_reused, status.chunks_embedded = progress.reused, progress.embedded
        if stored is not None:
            stored_version = int(stored["version"] or 0)
            # Neo4j alone says "done" only for a record gone (expired) or about an older ingestion:
            # for the same version, the write stage says done once Qdrant was tried too.
            if progress is None or stored_version > progress.version:
                status.state, status.updated_at, status.version = (
                    "done",
                    stored["ingested_at"],
                    stored_version,
                )
                status.chunks_reused = status.chunks_embedded = None
            status.chunks = stored["chunks"]
            status.vector_sync = VectorSyncCounts(
                pending=stored["pending"], synced=stored["synced"], failed=stored["failed"]
            )
        return status

    # The memory lifecycle (shared/services/lifecycle.py).

    def delete_document(self, user_id: str, document_id: str) -> DeleteResult:
        """Gone from Neo4j, and so from search, at once; from Qdrant through the write queue."""
        self.ping()
        result = self._lifecycle().delete_document(user_id, document_id)
        if result.memories:
            self._progress.set([(document_key(user_id, document_id), result.version)], "deleted")
        return result

    def delete_memory(self, user_id: str, memory_id: str) -> DeleteResult:
        self.ping()
        return self._lifecycle().delete_memory(user_id, memory_id)

    def delete_where(self, user_id: str, filters: SearchFilters, everything: bool = False) -> DeleteResult:
        self.ping()
        return self._lifecycle().delete_where(user_id, filters, everything)

    def replay(self, user_id: str | None = None, document_ids: Sequence[str] = ()) -> ReplayReport:
        """Re-drives failed documents (these, or every failed one) from what is staged."""
        self.ping()
        if document_ids:
            if user_id is None:
                raise InvalidInput("replaying named documents needs their tenant")
            keys = [document_key(user_id, d) for d in document_ids]
            found = {
                k: r
                for k, r in zip(keys, self._progress.records(keys), strict=True)
                if r and r.state == "failed"
            }
        else:
            found = self._progress.failed()
        return Replay(self._container.staging, self._progress, self._send_stage).run(found)

    def _send_stage(self, stage: Stage, batch_id: str, documents: list[DocRef]) -> None:
        with queue_errors():
            name = WRITE_TASK if stage == "write" else EMBED_TASK
            send_stage(self._app, self._ledger, name, (batch_id,), {"documents": documents})
