"""The HTTP SDK for apps: Engram's API over httpx, typed with the server's own models.

    from producers.http_client import EngramHTTP

    with EngramHTTP("http://127.0.0.1:8000", api_key="egk_...") as engram:
        accepted = engram.ingest({"text": "Maya moved to Lisbon in May.", "session_id": "chat-1"})
        engram.wait(accepted)                       # until every document is done or failed
        found = engram.search("where does Maya live", token_budget=500)
        print(found.context)

``AsyncEngramHTTP`` is the same with ``await``. The API key goes in ``X-API-Key`` (or
``Authorization: Bearer`` with ``auth="bearer"``); a tenant key decides the tenant, so
``user_id`` is needed only with an admin key.

An answer that means "not now" (429, 503) is retried a few times, waiting what its ``Retry-After``
asks (``shared.retry.HttpRetry``); any other error answer raises an ``EngramHTTPError`` of its
status (``NotFound``, ``Unauthorized``, ``InvalidRequest``, ...) carrying the status, the
``detail`` line, each invalid field (``errors``) and, for a 503, the ``service`` that is down.
A document or search the models refuse raises pydantic's ``ValidationError`` before anything is
sent; a connection that fails raises httpx's own ``TransportError`` (not retried: the request may
have been taken).

Importing this module loads httpx and pydantic and the models, never Celery, the Neo4j driver,
Redis or onnxruntime: an app installs ``engram[client]`` and talks to a served Engram.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

import httpx
from pydantic import ValidationError

from shared.api_models import DeleteWhere, Problem, ProblemItem
from shared.graph.models import EntityDetail, EntityPage
from shared.models import (
    DeleteResult,
    DocumentBody,
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

__all__ = [
    "AsyncEngramHTTP",
    "Conflict",
    "EngramHTTP",
    "EngramHTTPError",
    "Forbidden",
    "InvalidRequest",
    "NotFound",
    "PayloadTooLarge",
    "ServerError",
    "ServiceUnavailable",
    "TimedOut",
    "TooManyRequests",
    "Unauthorized",
    "WaitTimeout",
]

T = TypeVar("T")
Document = DocumentBody | Mapping[str, Any]
"""A document as the model, or as a mapping of its fields (checked by the model before sending)."""
FINAL_STATES = frozenset({"done", "failed", "deleted"})


class EngramHTTPError(Exception):
    """An error answer of the app: its status, its one-line ``detail``, each invalid field
    (``errors``, for a 422) and the ``service`` that is down (for a 503)."""

    def __init__(
        self,
        status: int,
        detail: str,
        errors: Sequence[ProblemItem] = (),
        service: str | None = None,
        retry_after: str | None = None,
    ) -> None:
        super().__init__(status, detail)
        self.status = status
        self.detail = detail
        self.errors = list(errors)
        self.service = service
        self.retry_after = retry_after

    def __str__(self) -> str:
        return f"{self.status}: {self.detail}"


class ClientError(EngramHTTPError):
    """A 4xx: the request, its key or its target is wrong; sending it again will not help."""


class InvalidRequest(ClientError):
    """400 (unreadable, a header twice, a host not served) or 422 (a field is invalid: ``errors``)."""


class Unauthorized(ClientError):
    """401: no API key, or an unknown or revoked one."""


class Forbidden(ClientError):
    """403: the key is not for the tenant named."""


class NotFound(ClientError):
    """404: no such document, memory or entity for this tenant."""


class Conflict(ClientError):
    """409: the same document twice in one request, or a body naming another document."""


class PayloadTooLarge(ClientError):
    """413: a body or a document over its size limit."""


class TooManyRequests(ClientError):
    """429, still refused after the retries."""


class ServerError(EngramHTTPError):
    """A 5xx: Engram's own error (logged on the server)."""


class ServiceUnavailable(ServerError):
    """503, still after the retries: ``service`` names what is down (``api``: too many searches wait)."""


class TimedOut(ServerError):
    """504: no query worker answered within the app's ENGRAM_SEARCH_TIMEOUT_S."""


class WaitTimeout(TimeoutError):
    """``wait`` gave up before every document was final; ``statuses`` are the last ones read."""

    def __init__(self, message: str, statuses: Sequence[DocumentStatus]) -> None:
        super().__init__(message)
        self.statuses = list(statuses)


_BY_STATUS: dict[int, type[EngramHTTPError]] = {
    400: InvalidRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    422: InvalidRequest,
    429: TooManyRequests,
    503: ServiceUnavailable,
    504: TimedOut,
}


def error_of(response: httpx.Response) -> EngramHTTPError:
    """The typed error of an error answer, its body read as the app's ``Problem``."""
    try:
        problem = Problem.model_validate_json(response.content)
    except ValidationError:
        text = response.text.strip()[:300] or response.reason_phrase
        problem = Problem(detail=text)
    kind = _BY_STATUS.get(response.status_code) or (
        ServerError if response.status_code >= 500 else ClientError
    )
    return kind(
        response.status_code,
        problem.detail,
        problem.errors,
        problem.service,
        response.headers.get("retry-after"),
    )


def _segment(value: str) -> str:
    """One path segment holding any identifier: "/" and "." escaped too, so an id such as
    ``a/../b`` or ``..`` is never read as a path of its own by a client or a proxy."""
    return quote(value, safe="").replace(".", "%2E")


@dataclass(frozen=True, slots=True)
class _Call(Generic[T]):
    """One operation of the API: the request, and how its answer is read."""

    method: str
    path: str
    read: Callable[[Any], T]
    params: dict[str, Any] = field(default_factory=dict)
    body: Any = None


def _params(**values: Any) -> dict[str, Any]:
    return {name: value for name, value in values.items() if value is not None}


def _document(document: Document) -> dict[str, Any]:
    model = document if isinstance(document, DocumentBody) else DocumentBody.model_validate(document)
    return model.model_dump(mode="json", exclude_unset=True)


def _overview(data: Any) -> TenantOverview | dict[str, Any]:
    """One tenant's counts, or (an admin key naming none) the whole store's overview as it is."""
    if isinstance(data, dict) and "queues" in data:
        return data
    return TenantOverview.model_validate(data)


class _Operations:
    """The requests of every operation, shared by the sync and async clients."""

    @staticmethod
    def ingest(documents: Document | Iterable[Document], force: bool = False) -> _Call[IngestAccepted]:
        if isinstance(documents, DocumentBody | Mapping) and not force:
            body: Any = _document(documents)
        else:
            one = isinstance(documents, DocumentBody | Mapping)
            listed = [_document(documents)] if one else [_document(d) for d in documents]  # type: ignore[arg-type]
            body = {"documents": listed, **({"force": True} if force else {})}
        return _Call("POST", "/api/documents", IngestAccepted.model_validate, body=body)

    @staticmethod
    def update(document_id: str, document: Document) -> _Call[IngestAccepted]:
        path = f"/api/documents/{_segment(document_id)}"
        return _Call("PUT", path, IngestAccepted.model_validate, body=_document(document))

    @staticmethod
    def status(document_id: str, user_id: str | None) -> _Call[DocumentStatus]:
        path = f"/api/documents/{_segment(document_id)}"
        return _Call("GET", path, DocumentStatus.model_validate, _params(user_id=user_id))

    @staticmethod
    def delete_document(document_id: str, user_id: str | None) -> _Call[DeleteResult]:
        path = f"/api/documents/{_segment(document_id)}"
        return _Call("DELETE", path, DeleteResult.model_validate, _params(user_id=user_id))

    @staticmethod
    def search(body: SearchBody) -> _Call[SearchResponse]:
        return _Call(
            "POST",
            "/api/memory/semantic-search",
            SearchResponse.model_validate,
            body=body.model_dump(mode="json", exclude_unset=True),
        )

    @staticmethod
    def list_memories(
        user_id: str | None, filters: SearchFilters | None, limit: int, cursor: str | None
    ) -> _Call[MemoryPage]:
        f = filters or SearchFilters()
        params = _params(
            user_id=user_id,
            project_id=f.project_id,
            session_id=f.session_id,
            document_id=f.document_id,
            memory_type=f.memory_types,
            tag=f.tags,
            from_date=None if f.from_date is None else f.from_date.isoformat(),
            to_date=None if f.to_date is None else f.to_date.isoformat(),
            limit=limit,
            cursor=cursor,
        )
        return _Call("GET", "/api/memories", MemoryPage.model_validate, params)

    @staticmethod
    def get_memory(memory_id: str | uuid.UUID, user_id: str | None) -> _Call[MemoryRecord]:
        path = f"/api/memories/{uuid.UUID(str(memory_id))}"
        return _Call("GET", path, MemoryRecord.model_validate, _params(user_id=user_id))

    @staticmethod
    def delete_memory(memory_id: str | uuid.UUID, user_id: str | None) -> _Call[DeleteResult]:
        path = f"/api/memories/{uuid.UUID(str(memory_id))}"
        return _Call("DELETE", path, DeleteResult.model_validate, _params(user_id=user_id))

    @staticmethod
    def delete_where(
        filters: SearchFilters | None, everything: bool, user_id: str | None
    ) -> _Call[DeleteResult]:
        body = DeleteWhere(user_id=user_id, filters=filters or SearchFilters(), everything=everything)
        return _Call(
            "POST",
            "/api/memories/delete",
            DeleteResult.model_validate,
            body=body.model_dump(mode="json", exclude_defaults=True),
        )

    @staticmethod
    def entities(
        user_id: str | None, prefix: str | None, q: str | None, kind: str | None, limit: int, offset: int
    ) -> _Call[EntityPage]:
        params = _params(user_id=user_id, prefix=prefix, q=q, kind=kind, limit=limit, offset=offset)
        return _Call("GET", "/api/entities", EntityPage.model_validate, params)

    @staticmethod
    def entity(name: str, user_id: str | None) -> _Call[EntityDetail]:
        path = f"/api/entities/{_segment(name)}"
        return _Call("GET", path, EntityDetail.model_validate, _params(user_id=user_id))

    @staticmethod
    def overview(user_id: str | None) -> _Call[TenantOverview | dict[str, Any]]:
        return _Call("GET", "/api/status", _overview, _params(user_id=user_id))


def _search_body(query: str | SearchBody, user_id: str | None, fields: dict[str, Any]) -> SearchBody:
    given = query.model_dump(exclude_unset=True) if isinstance(query, SearchBody) else {"query": query}
    return SearchBody.model_validate({**given, **_params(user_id=user_id, **fields)})


def _targets(
    documents: IngestAccepted | Sequence[str], version: int | None
) -> tuple[Sequence[str], int | None]:
    if isinstance(documents, IngestAccepted):
        return documents.document_ids, documents.version
    return documents, version


def _final(status: DocumentStatus, version: int | None) -> bool:
    """Final for the ingestion asked about: an older version's ``done`` is not this one's."""
    if status.state not in FINAL_STATES:
        return False
    return version is None or status.version is None or status.version >= version


def _headers(api_key: str | None, auth: Literal["x-api-key", "bearer"]) -> dict[str, str]:
    if api_key is None:
        return {}
    if auth == "bearer":
        return {"Authorization": f"Bearer {api_key}"}
    return {"X-API-Key": api_key}


class _Base:
    def __init__(self, retry: HttpRetry | None, sleep: Callable[[float], Any] | None) -> None:
        self.retry = retry or HttpRetry()
        self._sleep = sleep

    def _request(self, call: _Call[Any]) -> dict[str, Any]:
        return {
            "method": call.method,
            "url": call.path,
            "params": call.params or None,
            "json": call.body,
        }

    def _delay(self, response: httpx.Response, attempt: int) -> float | None:
        return self.retry.delay(response.status_code, response.headers.get("retry-after"), attempt)


class EngramHTTP(_Base):
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
            base_url=base_url, headers=_headers(api_key, auth), timeout=timeout, transport=transport
        )

    def __enter__(self) -> EngramHTTP:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _run(self, call: _Call[T]) -> T:
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
        return self._run(_Operations.ingest(documents, force))

    def update(self, document_id: str, document: Document) -> IngestAccepted:
        """Replaces a document: re-chunked and re-embedded at a new version."""
        return self._run(_Operations.update(document_id, document))

    def status(self, document_id: str, user_id: str | None = None) -> DocumentStatus:
        return self._run(_Operations.status(document_id, user_id))

    def wait(
        self,
        documents: IngestAccepted | Sequence[str],
        user_id: str | None = None,
        *,
        timeout: float = 120.0,
        poll_s: float = 0.5,
        version: int | None = None,
    ) -> list[DocumentStatus]:
        """Polls each document's status until it is final (done, failed or deleted) for this
        ingestion; raises ``WaitTimeout`` after ``timeout`` seconds."""
        ids, version = _targets(documents, version)
        deadline = time.monotonic() + timeout
        while True:
            statuses = [self.status(document_id, user_id) for document_id in ids]
            if all(_final(s, version) for s in statuses):
                return statuses
            if time.monotonic() >= deadline:
                raise WaitTimeout(f"documents not final after {timeout:g} s", statuses)
            (self._sleep or time.sleep)(poll_s)

    def delete_document(self, document_id: str, user_id: str | None = None) -> DeleteResult:
        """Gone from search at once (404 when the tenant has no such document)."""
        return self._run(_Operations.delete_document(document_id, user_id))

    forget = delete_document

    # Memories.

    def list_memories(
        self,
        user_id: str | None = None,
        filters: SearchFilters | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> MemoryPage:
        return self._run(_Operations.list_memories(user_id, filters, limit, cursor))

    def get_memory(self, memory_id: str | uuid.UUID, user_id: str | None = None) -> MemoryRecord:
        return self._run(_Operations.get_memory(memory_id, user_id))

    def delete_memory(self, memory_id: str | uuid.UUID, user_id: str | None = None) -> DeleteResult:
        return self._run(_Operations.delete_memory(memory_id, user_id))

    def delete_where(
        self, filters: SearchFilters | None = None, everything: bool = False, user_id: str | None = None
    ) -> DeleteResult:
        """Deletes the tenant's memories matching ``filters`` (all of them only with ``everything``)."""
        return self._run(_Operations.delete_where(filters, everything, user_id))

    # Search, entities, counts.

    def search(self, query: str | SearchBody, user_id: str | None = None, **fields: Any) -> SearchResponse:
        """A search by meaning and words; ``fields`` are ``SearchBody``'s (``top_k``,
        ``token_budget``, ``filters``, ``method``, ``neighbours``, ...)."""
        return self._run(_Operations.search(_search_body(query, user_id, fields)))

    def entities(
        self,
        user_id: str | None = None,
        prefix: str | None = None,
        q: str | None = None,
        kind: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> EntityPage:
        return self._run(_Operations.entities(user_id, prefix, q, kind, limit, offset))

    def entity(self, name: str, user_id: str | None = None) -> EntityDetail:
        return self._run(_Operations.entity(name, user_id))

    def overview(self, user_id: str | None = None) -> TenantOverview | dict[str, Any]:
        """A tenant key: its tenant's counts. An admin key: one tenant's, or the store's."""
        return self._run(_Operations.overview(user_id))


class AsyncEngramHTTP(_Base):
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
            base_url=base_url, headers=_headers(api_key, auth), timeout=timeout, transport=transport
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

    async def _run(self, call: _Call[T]) -> T:
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
        return await self._run(_Operations.ingest(documents, force))

    async def update(self, document_id: str, document: Document) -> IngestAccepted:
        return await self._run(_Operations.update(document_id, document))

    async def status(self, document_id: str, user_id: str | None = None) -> DocumentStatus:
        return await self._run(_Operations.status(document_id, user_id))

    async def wait(
        self,
        documents: IngestAccepted | Sequence[str],
        user_id: str | None = None,
        *,
        timeout: float = 120.0,
        poll_s: float = 0.5,
        version: int | None = None,
    ) -> list[DocumentStatus]:
        ids, version = _targets(documents, version)
        deadline = time.monotonic() + timeout
        while True:
            statuses = [await self.status(document_id, user_id) for document_id in ids]
            if all(_final(s, version) for s in statuses):
                return statuses
            if time.monotonic() >= deadline:
                raise WaitTimeout(f"documents not final after {timeout:g} s", statuses)
            await self._pause(poll_s)

    async def delete_document(self, document_id: str, user_id: str | None = None) -> DeleteResult:
        return await self._run(_Operations.delete_document(document_id, user_id))

    forget = delete_document

    async def list_memories(
        self,
        user_id: str | None = None,
        filters: SearchFilters | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> MemoryPage:
        return await self._run(_Operations.list_memories(user_id, filters, limit, cursor))

    async def get_memory(self, memory_id: str | uuid.UUID, user_id: str | None = None) -> MemoryRecord:
        return await self._run(_Operations.get_memory(memory_id, user_id))

    async def delete_memory(self, memory_id: str | uuid.UUID, user_id: str | None = None) -> DeleteResult:
        return await self._run(_Operations.delete_memory(memory_id, user_id))

    async def delete_where(
        self, filters: SearchFilters | None = None, everything: bool = False, user_id: str | None = None
    ) -> DeleteResult:
        return await self._run(_Operations.delete_where(filters, everything, user_id))

    async def search(
        self, query: str | SearchBody, user_id: str | None = None, **fields: Any
    ) -> SearchResponse:
        return await self._run(_Operations.search(_search_body(query, user_id, fields)))

    async def entities(
        self,
        user_id: str | None = None,
        prefix: str | None = None,
        q: str | None = None,
        kind: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> EntityPage:
        return await self._run(_Operations.entities(user_id, prefix, q, kind, limit, offset))

    async def entity(self, name: str, user_id: str | None = None) -> EntityDetail:
        return await self._run(_Operations.entity(name, user_id))

    async def overview(self, user_id: str | None = None) -> TenantOverview | dict[str, Any]:
        return await self._run(_Operations.overview(user_id))
