"""``/api/admin``: operations on the whole store, for an admin key only (a tenant key gets 403).

``POST /api/admin/restore`` sends ``engram restore`` to the reconcile queue (202 with the task
id); ``GET /api/admin/restore?to=neo4j`` shows its checkpoint: state, how far, the report so far.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from producers.http.auth import caller_of
from producers.http.bodies import JsonBody
from producers.http.deps import client
from shared.api_models import Problem
from shared.errors import Forbidden
from shared.models import Identifier

router = APIRouter(prefix="/api/admin", tags=["admin"])


class RestoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    to: Literal["neo4j", "qdrant"] = Field("neo4j", description="The store rebuilt from the other.")
    user_id: Identifier | None = Field(
        None, description="Only this tenant's memories; absent: every tenant's."
    )
    # Strict: a boolean is true or false, as the OpenAPI document says (pydantic alone reads 0 and
    # "yes"; the fuzz run's {"fresh": 0, "dry_run": 0} started a restore).
    dry_run: StrictBool = False
    fresh: StrictBool = Field(False, description="Start over rather than resume from the checkpoint.")


class RestoreStarted(BaseModel):
    task_id: str
    to: str


def _admin(request: Request) -> None:
    if not caller_of(request.scope).admin:
        raise Forbidden("an admin key is required for /api/admin")


_restore_body = JsonBody(RestoreRequest, "RestoreRequest")  # validated off the loop when large


@router.post(
    "/restore",
    status_code=202,
    response_model=RestoreStarted,
    openapi_extra=_restore_body.openapi_extra,
    responses={409: {"model": Problem, "description": "A restore is running: one at a time."}},
)
async def start_restore(
    body: Annotated[RestoreRequest, Depends(_restore_body)], request: Request
) -> RestoreStarted:
    """Sends the restore to the worker that may open Qdrant; poll GET for its progress."""
    _admin(request)
    options = body.model_dump(exclude={"user_id"})
    result = await run_in_threadpool(client().start_restore, tenant=body.user_id, **options)
    return RestoreStarted(task_id=str(result.id), to=body.to)


@router.get("/restore", response_model=dict[str, Any])
async def restore_state(request: Request, to: Literal["neo4j", "qdrant"] = Query("neo4j")) -> dict[str, Any]:
    """The restore's checkpoint: ``state`` (running, interrupted, done), ``total``, ``done``, ``report``."""
    _admin(request)
    state = await run_in_threadpool(client().restore_state, to)
    return state or {"state": "never run"}
