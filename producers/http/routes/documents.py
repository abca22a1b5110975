"""``/api/documents``: documents in (one, a list, a batch, n8n's items), their status, a
replacement, and their deletion. Nothing is enqueued unless every document in the body is valid;
an ingest holds one of the tenant's ingest slots while it enqueues."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path
from fastapi.concurrency import run_in_threadpool
from pydantic import BeforeValidator, Discriminator, Field, Tag

from producers.http.bodies import JsonBody
from producers.http.deps import CallerDep, TenantQuery, client, slots
from producers.http.n8n_items import N8nItem, is_n8n_item
from producers.http.problems import documented
from shared.api_models import DocumentBatch, DocumentList, at_most_a_batch
from shared.errors import InvalidInput
from shared.models import DeleteResult, DocumentBody, DocumentIn, DocumentStatus, Identifier, IngestAccepted
from shared.settings import get_settings

router = APIRouter()

# Path ids are checked as the body's are: the same identifier never reads two ways.
DocumentIdPath = Annotated[Identifier, Path(description="The document's id within the tenant.")]


# n8n's items (producers/http/n8n_items.py), counted before validation as the documents are.
ItemList = Annotated[list[N8nItem], BeforeValidator(at_most_a_batch), Field(min_length=1)]


def _body_kind(body: Any) -> str:
    """Which of the forms a body is, by its shape: errors then speak of that form alone."""
    if isinstance(body, list):
        return "items" if any(is_n8n_item(element) for element in body) else "list"
    if is_n8n_item(body):
        return "item"
    return "batch" if isinstance(body, dict) and "documents" in body else "document"


IngestBody = Annotated[
    Annotated[DocumentBody, Tag("document")]
    | Annotated[DocumentBatch, Tag("batch")]
    | Annotated[DocumentList, Tag("list")]
    | Annotated[N8nItem, Tag("item")]
    | Annotated[ItemList, Tag("items")],
    Discriminator(_body_kind),
]
# Bodies are parsed and validated off the event loop when large (producers.http.bodies).
_ingest_body = JsonBody(IngestBody, "Body")
_document_body = JsonBody(DocumentBody, "DocumentBody")


@router.post(
    "/api/documents",
    status_code=202,
    response_model=IngestAccepted,
    responses={409: documented("The same document twice in one request (two versions of it at once).")},
    openapi_extra=_ingest_body.openapi_extra,
)
async def ingest(
    body: Annotated[
        DocumentBody | DocumentBatch | N8nItem | list[DocumentBody] | list[N8nItem], Depends(_ingest_body)
    ],
    who: CallerDep,
) -> IngestAccepted:
    """One document, a list of them, ``{"documents": [...]}``, or n8n's items (``[{"json":
    {...}}, ...]``, each item's ``json`` a document). With a tenant key, every document is the
    key's tenant's: one naming another tenant refuses the whole request (403). A document stored
    exactly as given is not enqueued again: the answer lists it ``unchanged`` and its status says
    so; ``force`` (on the batch or on a document) redoes the request."""
    if isinstance(body, DocumentBody):
        bodies = [body]
    elif isinstance(body, DocumentBatch):
        bodies = body.documents
    elif isinstance(body, N8nItem):
        bodies = [body.document]
    else:
        bodies = [item.document if isinstance(item, N8nItem) else item for item in body]
    documents = [document.for_tenant(who.tenant_for(document.user_id)) for document in bodies]
    limit = get_settings().max_batch_documents
    if len(documents) > limit:
        raise InvalidInput(
            f"{len(documents)} documents in one request; the limit is {limit} (ENGRAM_MAX_BATCH_DOCUMENTS)"
        )
    force = (isinstance(body, DocumentBatch) and body.force) or any(document.force for document in bodies)
    return await _ingest(documents, force)


INGEST_LAPSE_S = 120.0
"""An ingest slot a killed process never gave back is free again after this."""


async def _ingest(documents: list[DocumentIn], force: bool) -> IngestAccepted:
    """Enqueued on the shared thread pool, while the tenant holds one of its ingest slots (so one
    tenant's flood of posts cannot take every thread from the others)."""
    limit = get_settings().tenant_max_ingests
    async with slots() as held_slots, AsyncExitStack() as held:
        for tenant in sorted({document.user_id for document in documents}):  # an admin's batch: each
            await held.enter_async_context(held_slots.held("ingest", tenant, limit, INGEST_LAPSE_S))
        return await run_in_threadpool(client().ingest, documents, None, force)


@router.get("/api/documents/{document_id:path}", response_model=DocumentStatus)
async def document_status(
    document_id: DocumentIdPath, who: CallerDep, user_id: TenantQuery = None
) -> DocumentStatus:
    user_id = who.tenant_for(user_id)
    status = await run_in_threadpool(client().status, user_id, document_id)
    if status.state == "unknown":
        raise HTTPException(status_code=404, detail=f"no document {document_id!r} for user {user_id!r}")
    return status


@router.put(
    "/api/documents/{document_id:path}",
    status_code=202,
    response_model=IngestAccepted,
    responses={409: documented("The body names another document (its id is not the path's).")},
    openapi_extra=_document_body.openapi_extra,
)
async def update_document(
    document_id: DocumentIdPath, body: Annotated[DocumentBody, Depends(_document_body)], who: CallerDep
) -> IngestAccepted:
    """Replaces a document: re-chunked and re-embedded at a new version, its old chunks removed.
    The path names the document; an ``id`` in the body, if any, must be the same."""
    if body.id is not None and body.id != document_id:
        raise HTTPException(409, f"the body's id {body.id!r} is not the path's {document_id!r}")
    document = body.for_tenant(who.tenant_for(body.user_id)).model_copy(update={"id": document_id})
    return await _ingest([document], body.force)


@router.delete("/api/documents/{document_id:path}", response_model=DeleteResult)
async def delete_document(
    document_id: DocumentIdPath, who: CallerDep, user_id: TenantQuery = None
) -> DeleteResult:
    """Gone from search at once; ``qdrant_confirmed`` says whether the backup dropped it too."""
    user_id = who.tenant_for(user_id)
    result = await run_in_threadpool(client().delete_document, user_id, document_id)
    if result.memories == 0:
        raise HTTPException(status_code=404, detail=f"no document {document_id!r} for user {user_id!r}")
    return result
