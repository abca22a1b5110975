"""``GET /api/status``: a tenant's counts, or (an admin key naming none) the whole store's."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool

from producers.http.deps import CallerDep, TenantQuery, client
from shared.models import TenantOverview

router = APIRouter()


@router.get("/api/status", response_model=TenantOverview | dict[str, Any])
async def overview(who: CallerDep, user_id: TenantQuery = None) -> TenantOverview | dict[str, Any]:
    """A tenant key sees its own tenant's counts; an admin key one tenant's (``user_id``) or the
    whole store's: queues, sync health, the reconciler's last pass."""
    if who.tenant is not None or user_id is not None:
        return await run_in_threadpool(client().tenant_overview, who.tenant_for(user_id))
    return await run_in_threadpool(client().overview)
