"""The SDK's asyncio client, ``AsyncEngramHTTP``: the core's calls sent over an
``httpx.AsyncClient``, the same methods as ``EngramHTTP`` with ``await``."""

from __future__ import annotations

import asyncio
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


class AsyncEngramHTTP(Base):
    """Engram's HTTP API for asyncio (``async with``); the methods are ``EngramHTTP``'s."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        auth: Literal["x-api-key", "bearer"] = "x-api-key",
        timeout: float = 60.0,
        retry: HttpRetry | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Any] | None = None,
    ) -> None:
        super().__init__(retry, sleep)
        self._http = httpx.AsyncClient(
            base_url=base_url, headers=auth_headers(api_key, auth), timeout=timeout, transport=transport
        )

    async def __aenter__(self) -> AsyncEngramHTTP:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _pause(self, seconds: float) -> None:
        if self._sleep is None:
            await asyncio.sleep(seconds)
        else:
            await self._sleep(seconds)

    async def _run(self, call: Call[T]) -> T:
        attempt = 1
        while True:
            response = await self._http.request(**self._request(call))
            if response.is_success:
                return call.read(response.json())
            delay = self._delay(response, attempt)
            if delay is None:
                raise error_of(response)
            await self._pause(delay)
            attempt += 1

    async def ingest(self, documents: Document | Iterable[Document], force: bool = False) -> IngestAccepted:
        return await self._run(Operations.ingest(documents, force))

    async def update(self, document_id: str, document: Document) -> IngestAccepted:
        return await self._run(Operations.update(document_id, document))

    async def status(self, document_id: str, user_id: str | None = None) -> DocumentStatus:
        return await self._run(Operations.status(document_id, user_id))

    async def wait(
        self,
        documents: IngestAccepted | Sequence[str],
        user_id: str | None = None,
        *,
        timeout: float = 120.0,
        poll_s: float = 0.5,
        version: int | None = None,
    ) -> list[DocumentStatus]:
        ids, version = targets(documents, version)
        deadline = time.monotonic() + timeout
        while True:
            statuses = [await self.status(document_id, user_id) for document_id in ids]
            if all(is_final(s, version) for s in statuses):
                return statuses
            if time.monotonic() >= deadline:
                raise WaitTimeout(f"documents not final after {timeout:g} s", statuses)
            await self._pause(poll_s)

    async def delete_document(self, document_id: str, user_id: str | None = None) -> DeleteResult:
        return await self._run(Operations.delete_document(document_id, user_id))

    forget = delete_document

    async def list_memories(
        self,
        user_id: str | None = None,
        filters: SearchFilters | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> MemoryPage:
        return await self._run(Operations.list_memories(user_id, filters, limit, cursor))

    async def get_memory(self, memory_id: str | uuid.UUID, user_id: str | None = None) -> MemoryRecord:
        return await self._run(Operations.get_memory(memory_id, user_id))

    async def delete_memory(self, memory_id: str | uuid.UUID, user_id: str | None = None) -> DeleteResult:
        return await self._run(Operations.delete_memory(memory_id, user_id))

    async def delete_where(
        self, filters: SearchFilters | None = None, everything: bool = False, user_id: str | None = None
    ) -> DeleteResult:
        return await self._run(Operations.delete_where(filters, everything, user_id))

    async def search(
        self, query: str | SearchBody, user_id: str | None = None, **fields: Any
    ) -> SearchResponse:
        return await self._run(Operations.search(search_body(query, user_id, fields)))

    async def entities(
        self,
        user_id: str | None = None,
        prefix: str | None = None,
        q: str | None = None,
        kind: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> EntityPage:
        return await self._run(Operations.entities(user_id, prefix, q, kind, limit, offset))

    async def entity(self, name: str, user_id: str | None = None) -> EntityDetail:
        return await self._run(Operations.entity(name, user_id))

    async def overview(self, user_id: str | None = None) -> TenantOverview | dict[str, Any]:
        return await self._run(Operations.overview(user_id))
