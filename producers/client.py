"""The client for apps: enqueue documents, search through the query queue, read status.

Everything a producer does goes through here, so the HTTP app, the CLI and an app embedding this
module enforce the same limits and speak to the queues the same way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

import celery.exceptions
import kombu.exceptions
import redis
from celery import Celery

from shared.errors import DocumentTooLarge, InvalidInput, SearchTimeout, ServiceUnavailable
from shared.ids import document_key
from shared.models import (
    DocumentIn,
    DocumentStatus,
    IngestAccepted,
    SearchRequest,
    SearchResponse,
    VectorSyncCounts,
)
from shared.progress import Progress
from shared.redis_client import START_HINT, connect, translated_errors
from shared.settings import Settings, get_settings
from shared.stores.neo4j import Neo4jStore
from workers.app import CHUNK_TASK, QUEUES, RECONCILE_TASK, SEARCH_TASK
from workers.app import app as default_app


def check_document(document: DocumentIn, settings: Settings) -> None:
    size = len(document.text.encode("utf-8"))
    if size > settings.max_document_bytes:
        raise DocumentTooLarge(
            f"document {document.document_id!r} is {size} bytes; the limit is "
            f"{settings.max_document_bytes} (ENGRAM_MAX_DOCUMENT_BYTES)"
        )


def batches(
    documents: Sequence[DocumentIn], max_documents: int, max_bytes: int
) -> Iterator[list[DocumentIn]]:
    """Groups documents for one ingest task each: few enough to keep a task short."""
    batch: list[DocumentIn] = []
    size = 0
    for document in documents:
        length = len(document.text.encode("utf-8"))
        if batch and (len(batch) >= max_documents or size + length > max_bytes):
            yield batch
            batch, size = [], 0
        batch.append(document)
        size += length
    if batch:
        yield batch


@contextmanager
def queue_errors() -> Iterator[None]:
    """Broker and result-store failures, in whatever form Celery raises them, as one clear error."""
    try:
        yield
    except (kombu.exceptions.OperationalError, redis.ConnectionError, redis.TimeoutError) as exc:
        raise ServiceUnavailable("redis", str(exc), START_HINT) from exc
    except RuntimeError as exc:
        # Celery's result consumer gives up on a lost Redis with a bare RuntimeError.
        if isinstance(exc.__cause__, redis.ConnectionError | redis.TimeoutError | OSError):
            raise ServiceUnavailable("redis", str(exc.__cause__), START_HINT) from exc
        raise


class EngramClient:
    def __init__(self, settings: Settings | None = None, app: Celery | None = None) -> None:
        self.settings = settings or get_settings()
        self._app = app or default_app
        self._redis = connect(self.settings)
        self._progress = Progress(self._redis, self.settings.staging_ttl_s)
        self._neo4j: Neo4jStore | None = None

    def close(self) -> None:
        if self._neo4j is not None:
            self._neo4j.close()
        self._redis.close()

    def ping(self) -> None:
        with translated_errors():
            self._redis.ping()

    # Ingestion.

    def ingest(self, documents: Sequence[DocumentIn], batch_documents: int | None = None) -> IngestAccepted:
        """Checks every document first, so a bad one enqueues nothing, then enqueues in batches."""
        if not documents:
            raise InvalidInput("no documents given")
        self.ping()
        seen: set[str] = set()
        for document in documents:
            check_document(document, self.settings)
            key = document_key(document.user_id, document.document_id)
            if key in seen:
                raise InvalidInput(f"document {document.document_id!r} appears twice in one request")
            seen.add(key)
        size = batch_documents or self.settings.ingest_batch_documents
        task_ids: list[str] = []
        for batch in batches(documents, size, max(self.settings.max_document_bytes, 256_000)):
            keys = [document_key(d.user_id, d.document_id) for d in batch]
            self._progress.set(keys, "queued")
            payload = [d.model_dump(mode="json", exclude_none=True) for d in batch]
            with queue_errors():
                task_ids.append(self._app.send_task(CHUNK_TASK, args=(payload,)).id)
        return IngestAccepted(
            accepted=len(documents),
            document_ids=[d.document_id for d in documents],
            task_ids=task_ids,
        )

    def states(self, keys: Iterable[str]) -> Counter[str]:
        """How many of these documents are in each state: for progress over a bulk load."""
        return Counter(self._progress.states(keys))

    def chunk_count(self, keys: Sequence[str]) -> int:
        """Chunks stored for these documents."""
        return self._store().chunk_count(keys)

    def status(self, user_id: str, document_id: str) -> DocumentStatus:
        key = document_key(user_id, document_id)
        progress = self._progress.get(key)
        stored = self._store().document_status(key)
        status = DocumentStatus(document_id=document_id, user_id=user_id, state="unknown")
        if progress is not None:
            status.state, status.error, status.updated_at = progress
        if stored is not None:
            if progress is None:
                status.state, status.updated_at = "done", stored["ingested_at"]
            status.chunks = stored["chunks"]
            status.vector_sync = VectorSyncCounts(
                pending=stored["pending"], synced=stored["synced"], failed=stored["failed"]
            )
        return status

    def overview(self) -> dict[str, Any]:
        """Queue lengths and the vector_sync counts of the whole store."""
        with translated_errors():
            queues = {name: cast(int, self._redis.llen(name)) for name in QUEUES}
        return {"queues": queues, "vector_sync": self._store().vector_sync_counts().model_dump()}

    # Search and reconciliation, through their queues.

    def search(self, request: SearchRequest, timeout_s: float | None = None) -> SearchResponse:
        timeout = timeout_s or self.settings.search_timeout_s
        self.ping()  # fails at once with a clear line, where Celery would retry for long
        with queue_errors():
            result = self._app.send_task(
                SEARCH_TASK, args=(request.model_dump(mode="json"),), expires=timeout
            )
            try:
                answer = result.get(timeout=timeout, propagate=True)
            except celery.exceptions.TimeoutError as exc:
                result.revoke()
                raise SearchTimeout(f"no query worker answered within {timeout:g} s") from exc
            finally:
                result.forget()
        return SearchResponse.model_validate(answer)

    def reconcile(self, dry_run: bool = False, timeout_s: float | None = 600.0) -> dict[str, Any]:
        """Runs the reconciler through its queue; waits for its report unless timeout_s is None."""
        self.ping()
        with queue_errors():
            result = self._app.send_task(RECONCILE_TASK, kwargs={"dry_run": dry_run})
            if timeout_s is None:
                return {"task_id": result.id}
            try:
                report: dict[str, Any] = result.get(timeout=timeout_s, propagate=True)
            except celery.exceptions.TimeoutError as exc:
                raise SearchTimeout(f"the reconciler did not report within {timeout_s:g} s") from exc
        return report

    def _store(self) -> Neo4jStore:
        if self._neo4j is None:
            self._neo4j = Neo4jStore(self.settings)
        return self._neo4j
