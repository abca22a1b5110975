"""The SDK's sans-I/O core: each operation of the API as a ``Call`` (method, path, parameters,
body, and how its answer is read), and what the sync and async clients share (headers, retry
delays, when a wait is over). No request is sent here: ``sync.py`` and ``aio.py`` send them."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

import httpx

from shared.api_models import DeleteWhere
from shared.graph.models import EntityDetail, EntityPage
from shared.models import (
    FINAL_STATES,
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

T = TypeVar("T")
Document = DocumentBody | Mapping[str, Any]
"""A document as the model, or as a mapping of its fields (checked by the model before sending)."""


def _segment(value: str) -> str:
    """One path segment holding any identifier: "/" and "." escaped too, so an id such as
    ``a/../b`` or ``..`` is never read as a path of its own by a client or a proxy."""
    return quote(value, safe="").replace(".", "%2E")


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
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


class Operations:
    """The requests of every operation, shared by the sync and async clients."""

    @staticmethod
    def ingest(documents: Document | Iterable[Document], force: bool = False) -> Call[IngestAccepted]:
        if isinstance(documents, DocumentBody | Mapping) and not force:
            body: Any = _document(documents)
        else:
            one = isinstance(documents, DocumentBody | Mapping)
            listed = [_document(documents)] if one else [_document(d) for d in documents]  # type: ignore[arg-type]
            body = {"documents": listed, **({"force": True} if force else {})}
        return Call("POST", "/api/documents", IngestAccepted.model_validate, body=body)

    @staticmethod
    def update(document_id: str, document: Document) -> Call[IngestAccepted]:
        path = f"/api/documents/{_segment(document_id)}"
        return Call("PUT", path, IngestAccepted.model_validate, body=_document(document))

    @staticmethod
    def status(document_id: str, user_id: str | None) -> Call[DocumentStatus]:
        path = f"/api/documents/{_segment(document_id)}"
        return Call("GET", path, DocumentStatus.model_validate, _params(user_id=user_id))

    @staticmethod
    def delete_document(document_id: str, user_id: str | None) -> Call[DeleteResult]:
        path = f"/api/documents/{_segment(document_id)}"
        return Call("DELETE", path, DeleteResult.model_validate, _params(user_id=user_id))

    @staticmethod
    def search(body: SearchBody) -> Call[SearchResponse]:
        return Call(
            "POST",
            "/api/memory/semantic-search",
            SearchResponse.model_validate,
            body=body.model_dump(mode="json", exclude_unset=True),
        )

    @staticmethod
    def list_memories(
        user_id: str | None, filters: SearchFilters | None, limit: int, cursor: str | None
    ) -> Call[MemoryPage]:
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
        return Call("GET", "/api/memories", MemoryPage.model_validate, params)

    @staticmethod
    def get_memory(memory_id: str | uuid.UUID, user_id: str | None) -> Call[MemoryRecord]:
        path = f"/api/memories/{uuid.UUID(str(memory_id))}"
        return Call("GET", path, MemoryRecord.model_validate, _params(user_id=user_id))

    @staticmethod
    def delete_memory(memory_id: str | uuid.UUID, user_id: str | None) -> Call[DeleteResult]:
        path = f"/api/memories/{uuid.UUID(str(memory_id))}"
        return Call("DELETE", path, DeleteResult.model_validate, _params(user_id=user_id))

    @staticmethod
    def delete_where(
        filters: SearchFilters | None, everything: bool, user_id: str | None
    ) -> Call[DeleteResult]:
        body = DeleteWhere(user_id=user_id, filters=filters or SearchFilters(), everything=everything)
        return Call(
            "POST",
            "/api/memories/delete",
            DeleteResult.model_validate,
            body=body.model_dump(mode="json", exclude_defaults=True),
        )

    @staticmethod
    def entities(
        user_id: str | None, prefix: str | None, q: str | None, kind: str | None, limit: int, offset: int
    ) -> Call[EntityPage]:
        params = _params(user_id=user_id, prefix=prefix, q=q, kind=kind, limit=limit, offset=offset)
        return Call("GET", "/api/entities", EntityPage.model_validate, params)

    @staticmethod
    def entity(name: str, user_id: str | None) -> Call[EntityDetail]:
        path = f"/api/entities/{_segment(name)}"
        return Call("GET", path, EntityDetail.model_validate, _params(user_id=user_id))

    @staticmethod
    def overview(user_id: str | None) -> Call[TenantOverview | dict[str, Any]]:
        return Call("GET", "/api/status", _overview, _params(user_id=user_id))


def search_body(query: str | SearchBody, user_id: str | None, fields: dict[str, Any]) -> SearchBody:
    given = query.model_dump(exclude_unset=True) if isinstance(query, SearchBody) else {"query": query}
    return SearchBody.model_validate({**given, **_params(user_id=user_id, **fields)})


def targets(
    documents: IngestAccepted | Sequence[str], version: int | None
) -> tuple[Sequence[str], int | None]:
    if isinstance(documents, IngestAccepted):
        return documents.document_ids, documents.version
    return documents, version


def is_final(status: DocumentStatus, version: int | None) -> bool:
    """Final for the ingestion asked about: an older version's ``done`` is not this one's."""
    if status.state not in FINAL_STATES:
        return False
    return version is None or status.version is None or status.version >= version


def auth_headers(api_key: str | None, auth: Literal["x-api-key", "bearer"]) -> dict[str, str]:
    if api_key is None:
        return {}
    if auth == "bearer":
        return {"Authorization": f"Bearer {api_key}"}
    return {"X-API-Key": api_key}


class Base:
    def __init__(self, retry: HttpRetry | None, sleep: Callable[[float], Any] | None) -> None:
        self.retry = retry or HttpRetry()
        self._sleep = sleep

    def _request(self, call: Call[Any]) -> dict[str, Any]:
        return {
            "method": call.method,
            "url": call.path,
            "params": call.params or None,
            "json": call.body,
        }

    def _delay(self, response: httpx.Response, attempt: int) -> float | None:
        return self.retry.delay(response.status_code, response.headers.get("retry-after"), attempt)
