"""``POST /api/memory/semantic-search``: a search through the ``query`` queue, awaited on the
event loop (``producers.http.searches``), never on a thread, so waiting searches cannot starve
the other routes or ``/healthz``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from producers.http.arrival import arrived
from producers.http.bodies import JsonBody
from producers.http.deps import CallerDep, search
from producers.http.problems import documented
from shared.models import SearchBody, SearchResponse

router = APIRouter()

_search_body = JsonBody(SearchBody, "SearchBody")


@router.post(
    "/api/memory/semantic-search",
    response_model=SearchResponse,
    responses={504: documented("No answer within ENGRAM_SEARCH_TIMEOUT_S of the request's arrival.")},
    openapi_extra=_search_body.openapi_extra,
)
async def semantic_search(
    body: Annotated[SearchBody, Depends(_search_body)], who: CallerDep, http: Request
) -> SearchResponse:
    """Waits at most ENGRAM_SEARCH_TIMEOUT_S from the request's arrival (504 after it); 503 with
    ``Retry-After`` when ENGRAM_API_MAX_PENDING_SEARCHES already wait in this process."""
    return await search(body.for_tenant(who.tenant_for(body.user_id)), arrived(http))
