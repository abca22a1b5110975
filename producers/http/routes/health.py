"""``GET /healthz``: each service checked at once within about a second (probes on threads of
their own, ``producers.http.health``); open to anyone, its details only to an admin key."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from producers.http import health
from producers.http.auth import Ambiguous, api_key_of
from producers.http.deps import authenticator, probes
from shared.errors import ServiceUnavailable, Unauthenticated
from shared.settings import get_settings

router = APIRouter()


async def _is_admin(request: Request) -> bool:
    """Whether an open route's caller sent an admin key, read as every key is (``api_key_of``);
    a wrong, absent or twice-given key is no error here, just no admin."""
    if get_settings().auth_mode == "local":
        return True
    try:
        token = api_key_of({name.lower(): value for name, value in request.headers.items()})
        return (await run_in_threadpool(authenticator().bearer, token)).admin
    except (Ambiguous, Unauthenticated, ServiceUnavailable):
        return False


@router.get("/healthz", response_model=health.Health, responses={503: {"model": health.Health}})
async def healthz(checks: Annotated[health.Probes, Depends(probes)], request: Request) -> JSONResponse:
    """Each service, checked at once within about a second; 503 when Redis is down. Anyone sees
    the services' names and states; what went wrong (addresses, paths, hosts) only an admin key."""
    report = await health.check(checks)
    if not await _is_admin(request):
        report = report.without_details()
    return JSONResponse(status_code=report.http_status, content=report.model_dump(mode="json"))
