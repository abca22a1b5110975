"""The SDK's blocking client, ``EngramHTTP``: the core's calls sent over an ``httpx.Client``."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

import httpx

from producers.sdk.core import (
    Base,
    Call,
    Document,
    Operations,
    T,
    auth_headers,
    is_final,
    search_body,
    targets,
)
from producers.sdk.errors import WaitTimeout, error_of
from shared.graph.models import EntityDetail, EntityPage
from shared.models import (
    DeleteResult,
    DocumentStatus,
    IngestAccepted,
    MemoryPage,
    MemoryRecord,
    SearchBody,
    SearchFilters,
    SearchResponse,
    TenantOverview,
)
from shared.retry import HttpRetry


class EngramHTTP(Base):
    """Engram's HTTP API, blocking. A context manager (closes its connections); thread-safe as
    httpx's ``Client`` is."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        auth: Literal["x-api-key", "bearer"] = "x-api-key",
        timeout: float = 60.0,
        retry: HttpRetry | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        super().__init__(retry, sleep)
        self._http = httpx.Client(
            base_url=base_url, headers=auth_headers(api_key, auth), timeout=timeout, transport=transport
        )

    def __enter__(self) -> EngramHTTP:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _run(self, call: Call[T]) -> T:
        attempt = 1
        while True:
            response = self._http.request(**self._request(call))
            if response.is_success:
                return call.read(response.json())
            delay = self._delay(response, attempt)
            if delay is None:
                raise error_of(response)
            (self._sleep or time.sleep)(delay)
            attempt += 1

    # Ingestion and documents.

    def ingest(self, documents: Document | Iterable[Document], force: bool = False) -> IngestAccepted:
        """One document (a ``DocumentBody`` or a mapping of its fields) or several in one request:
        every one is checked by the app before any is enqueued (202). One stored exactly as given
        already is listed ``unchanged`` and not enqueued; ``force`` redoes it."""
        return self._run(Operations.ingest(documents, force))

    def update(self, document_id: str, document: Document) -> IngestAccepted:
        """Replaces a document: re-chunked and re-embedded at a new version."""
        return self._run(Operations.update(document_id, document))

    def status(self, document_id: str, user_id: str | None = None) -> DocumentStatus:
        return self._run(Operations.status(document_id, user_id))

    def wait(
        self,
        documents: IngestAccepted | Sequence[str],
        user_id: str | None = None,
        *,
        timeout: float = 120.0,
        poll_s: float = 0.5,
        version: int | None = None,
    ) -> list[DocumentStatus]:
        """Polls each document's status until it is final (done, failed, deleted or unchanged) for this
        ingestion; raises ``WaitTimeout`` after ``timeout`` seconds."""
        ids, version = targets(documents, version)
        deadline = time.monotonic() + timeout
        while True:
            statuses = [self.status(document_id, user_id) for document_id in ids]
            if all(is_final(s, version) for s in statuses):
                return statuses
            if time.monotonic() >= deadline:
                raise WaitTimeout(f"documents not final after {timeout:g} s", statuses)
            (self._sleep or time.sleep)(poll_s)

    def delete_document(self, document_id: str, user_id: str | None = None) -> DeleteResult:
        """Gone from search at once (404 when the tenant has no such document)."""
        return self._run(Operations.delete_document(document_id, user_id))

    forget = delete_document

    # Memories.

    def list_memories(
        self,
        user_id: str | None = None,
        filters: SearchFilters | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> MemoryPage:
        return self._run(Operations.list_memories(user_id, filters, limit, cursor))

    def get_memory(self, memory_id: str | uuid.UUID, user_id: str | None = None) -> MemoryRecord:
        return self._run(Operations.get_memory(memory_id, user_id))

    def delete_memory(self, memory_id: str | uuid.UUID, user_id: str | None = None) -> DeleteResult:
        return self._run(Operations.delete_memory(memory_id, user_id))

    def delete_where(
        self, filters: SearchFilters | None = None, everything: bool = False, user_id: str | None = None
    ) -> DeleteResult:
        """Deletes the tenant's memories matching ``filters`` (all of them only with ``everything``)."""
        return self._run(Operations.delete_where(filters, everything, user_id))

    # Search, entities, counts.

    def search(self, query: str | SearchBody, user_id: str | None = None, **fields: Any) -> SearchResponse:
        """A search by meaning and words; ``fields`` are ``SearchBody``'s (``top_k``,
        ``token_budget``, ``filters``, ``method``, ``neighbours``, ...)."""
        return self._run(Operations.search(search_body(query, user_id, fields)))

    def entities(
        self,
        user_id: str | None = None,
        prefix: str | None = None,
        q: str | None = None,
        kind: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> EntityPage:
        return self._run(Operations.entities(user_id, prefix, q, kind, limit, offset))

    def entity(self, name: str, user_id: str | None = None) -> EntityDetail:
        return self._run(Operations.entity(name, user_id))

    def overview(self, user_id: str | None = None) -> TenantOverview | dict[str, Any]:
        """A tenant key: its tenant's counts. An admin key: one tenant's, or the store's."""
        return self._run(Operations.overview(user_id))
