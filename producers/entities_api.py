"""``GET /api/entities``: the tenant's entities (seed 003), listed, searched by name, and one
shown with the memories that mention it and the entities mentioned with it. The tenant comes
from the API key, as on every other route."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request, Security
from fastapi.concurrency import run_in_threadpool
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from producers.auth import caller_of
from producers.client import EngramClient
from shared.auth import Caller
from shared.graph.entities import EntityKind, normalise
from shared.graph.models import EntityDetail, EntityPage
from shared.models import TENANT_FROM_KEY, Identifier

router = APIRouter(tags=["entities"])

_bearer = HTTPBearer(auto_error=False, description="An API key: engram keys create")
_api_key = APIKeyHeader(name="X-API-Key", auto_error=False, description="The same key (n8n Header Auth)")

TenantQuery = Annotated[Identifier | None, Query(description=TENANT_FROM_KEY)]
NameText = Annotated[Identifier | None, Query(max_length=200)]


def caller(
    request: Request,
    _bearer_key: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
    _header_key: Annotated[str | None, Security(_api_key)],
) -> Caller:
    return caller_of(request.scope)


def client() -> EngramClient:
    from producers.api import client as app_client  # the app's one client, made on first use

    return app_client()


CallerDep = Annotated[Caller, Depends(caller)]


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
