"""What every part of the broker client shares: its connections (from the composition root,
``shared/container.py``), the checks of a document, its batching, and Celery's and Redis's
failures read as Engram's errors."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import celery.exceptions
import kombu.exceptions
import redis
from celery import Celery

from shared.confusables import refuse_look_alike
from shared.container import Container
from shared.errors import DocumentTooLarge, ServiceUnavailable
from shared.models import DocumentIn
from shared.redis_client import START_HINT, out_of_memory, out_of_memory_in, translated_errors
from shared.services.lifecycle import Lifecycle
from shared.settings import Settings, get_settings
from shared.stores.neo4j import Neo4jStore
from workers.app import SYNC_TASK
from workers.app import app as default_app


def check_document(document: DocumentIn, settings: Settings) -> None:
    refuse_look_alike(document.user_id, settings.allow_lookalike_tenants)
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
        full = out_of_memory_in(exc)
        raise (out_of_memory(full) if full else ServiceUnavailable("redis", str(exc), START_HINT)) from exc
    except redis.OutOfMemoryError as exc:
        raise out_of_memory(exc) from exc
    except RuntimeError as exc:
        # Celery's result consumer gives up on a lost Redis with a bare RuntimeError.
        if isinstance(exc.__cause__, redis.ConnectionError | redis.TimeoutError | OSError):
            raise ServiceUnavailable("redis", str(exc.__cause__), START_HINT) from exc
        raise


class ClientBase:
    """The connections and the settings; the parts (ingest, reads, admin) add the operations."""

    def __init__(
        self, settings: Settings | None = None, app: Celery | None = None, container: Container | None = None
    ) -> None:
        self.settings = settings or get_settings()
        self._app = app or default_app
        # Stores and Redis from the composition root (shared/container.py), made on first use.
        self._container = container or Container(self.settings)
        self._redis = self._container.redis
        self._progress = self._container.progress
        self._versions = self._container.versions
        self._ledger = self._container.ledger
        self._read_results: list[str] = []  # search results read, deleted with the next ping

    def close(self) -> None:
        if self._read_results:
            with suppress(ServiceUnavailable):
                self.ping()
        self._container.close()

    def ping(self) -> None:
        """Redis in reach, or a clear error at once (Celery would retry for long). The search
        results read since the last ping are deleted in the same round trip, not one each on
        their searches' way back (a query worker that serves searches alone expires them soon
        anyway: workers/query.py)."""
        keys, self._read_results = self._read_results, []
        with translated_errors():
            if not keys:
                self._redis.ping()
                return
            pipe = self._redis.pipeline(transaction=False)
            pipe.delete(*keys)
            pipe.ping()
            pipe.execute()

    def _drop_later(self, task_id: str) -> None:
        """A read (or abandoned) search result, deleted with the next ping."""
        self._read_results.append(self._app.backend.get_key_for_task(task_id).decode())

    def _store(self) -> Neo4jStore:
        return self._container.graph

    def _lifecycle(self) -> Lifecycle:
        return Lifecycle(self._store(), self._versions.next, self._sync_removed)

    def _sync_removed(self, ids: Sequence[str]) -> bool:
        """Asks the process that owns Qdrant to drop these points; True once it confirmed."""
        with queue_errors():
            answer = self._app.send_task(SYNC_TASK, args=(list(ids),))
            try:
                outcome: dict[str, Any] = answer.get(
                    timeout=self.settings.delete_confirm_timeout_s, propagate=True
                )
            except celery.exceptions.TimeoutError:
                return False
            finally:
                answer.forget()
        return not outcome.get("error")
