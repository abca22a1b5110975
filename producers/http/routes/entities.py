"""``GET /api/entities``: the tenant's entities (seed 003), listed, searched by name, and one
shown with the memories that mention it and the entities mentioned with it. The tenant comes
from the API key, as on every other route."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query
from fastapi.concurrency import run_in_threadpool

from producers.http.deps import CallerDep, TenantQuery, client
from shared.graph.entities import EntityKind, normalise
from shared.graph.models import EntityDetail, EntityPage
from shared.models import Identifier

router = APIRouter(tags=["entities"])

NameText = Annotated[Identifier | None, Query(max_length=200)]


def _matches_nothing(*names: str | None) -> bool:
    """A name with no letter or digit ("---") is a valid identifier that no entity is named by."""
    return any(name is not None and not normalise(name) for name in names)


@router.get("/api/entities", response_model=EntityPage)
async def list_entities(
    who: CallerDep,
    user_id: TenantQuery = None,
    prefix: NameText = None,
    q: NameText = None,
    kind: EntityKind | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> EntityPage:
    """The tenant's entities, most mentioned first: ``prefix`` matches the start of a name or an
    alias, ``q`` any part of the name (both case-blind)."""
    tenant = who.tenant_for(user_id)
    if _matches_nothing(prefix, q):
        return EntityPage(entities=[])
    return await run_in_threadpool(client().list_entities, tenant, prefix, q, kind, limit, offset)


@router.get("/api/entities/{name:path}", response_model=EntityDetail)
async def get_entity(
    name: Annotated[Identifier, Path(description="The entity's name, any way it was written.")],
    who: CallerDep,
    user_id: TenantQuery = None,
) -> EntityDetail:
    """One entity: the memories that mention it (newest first) and the entities mentioned with it."""
    tenant = who.tenant_for(user_id)
    found = None if _matches_nothing(name) else await run_in_threadpool(client().get_entity, tenant, name)
    if found is None:
        raise HTTPException(status_code=404, detail=f"no entity {name!r} for user {tenant!r}")
    return found
