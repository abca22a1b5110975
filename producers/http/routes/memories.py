"""``/api/memories``: a tenant's memories, a page at a time by filters, one by its id, and their
deletion (one, or every one matching filters)."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, Query
from fastapi.concurrency import run_in_threadpool

from producers.http.bodies import JsonBody
from producers.http.deps import CallerDep, TenantQuery, client
from shared.api_models import DeleteWhere
from shared.models import DeleteResult, Identifier, MemoryPage, MemoryRecord, Moment, SearchFilters

router = APIRouter()

# A memory's id is a UUID (shared/ids.py), so "/api/memories/delete" is never read as memory "delete".
MemoryIdPath = Annotated[uuid.UUID, Path(description="The memory's id.")]


@router.get("/api/memories", response_model=MemoryPage)
async def list_memories(
    who: CallerDep,
    user_id: TenantQuery = None,
    project_id: Identifier | None = None,
    session_id: Identifier | None = None,
    document_id: Identifier | None = None,
    memory_type: Annotated[list[Identifier] | None, Query(max_length=32)] = None,
    tag: Annotated[list[Identifier] | None, Query(max_length=32)] = None,
    from_date: Moment | None = None,
    to_date: Moment | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: str | None = None,
) -> MemoryPage:
    """The tenant's memories matching the filters, a page at a time (``next_cursor``)."""
    user_id = who.tenant_for(user_id)
    filters = SearchFilters(
        project_id=project_id,
        session_id=session_id,
        document_id=document_id,
        memory_types=memory_type,
        tags=tag,
        from_date=from_date,
        to_date=to_date,
    )
    return await run_in_threadpool(client().list_memories, user_id, filters, limit, cursor)


@router.get("/api/memories/{memory_id:uuid}", response_model=MemoryRecord)
async def get_memory(memory_id: MemoryIdPath, who: CallerDep, user_id: TenantQuery = None) -> MemoryRecord:
    user_id = who.tenant_for(user_id)
    memory = await run_in_threadpool(client().get_memory, user_id, str(memory_id))
    if memory is None:
        raise HTTPException(status_code=404, detail=f"no memory {str(memory_id)!r} for user {user_id!r}")
    return memory


@router.delete("/api/memories/{memory_id:uuid}", response_model=DeleteResult)
async def delete_memory(memory_id: MemoryIdPath, who: CallerDep, user_id: TenantQuery = None) -> DeleteResult:
    user_id = who.tenant_for(user_id)
    result = await run_in_threadpool(client().delete_memory, user_id, str(memory_id))
    if result.memories == 0:
        raise HTTPException(status_code=404, detail=f"no memory {str(memory_id)!r} for user {user_id!r}")
    return result


_delete_body = JsonBody(DeleteWhere, "DeleteWhere")


@router.post("/api/memories/delete", response_model=DeleteResult, openapi_extra=_delete_body.openapi_extra)
async def delete_where(
    request: Annotated[DeleteWhere, Depends(_delete_body)], who: CallerDep
) -> DeleteResult:
    """Deletes the tenant's memories matching the filters (only that tenant's)."""
    return await run_in_threadpool(
        client().delete_where, who.tenant_for(request.user_id), request.filters, request.everything
    )
