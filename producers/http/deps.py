"""Every FastAPI dependency of the HTTP app in one place: its one client and authenticator (made on
first use), who calls (``caller``, as ``AuthGuard`` found it) and for which tenant, the searches
and tenant slots of this event loop, and the health probes. Routes and the status page import them
from here, never from the app module, so no router imports the app back; ``lifespan`` opens and
closes what they hold.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import lru_cache
from typing import Annotated

from fastapi import Depends, FastAPI, Query, Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from producers.client import EngramClient
from producers.http import health
from producers.http.auth import caller_of
from producers.http.health_cache import reuse_slow
from producers.http.searches import Searches
from producers.http.tenant_slots import TenantSlots
from shared.auth import Authenticator, Caller
from shared.models import TENANT_FROM_KEY, Identifier, SearchRequest, SearchResponse
from shared.settings import get_settings

# The tenant in a query string: optional, since the key decides it (an admin key must name it).
TenantQuery = Annotated[Identifier | None, Query(description=TENANT_FROM_KEY)]


@lru_cache(maxsize=1)
def client() -> EngramClient:
    return EngramClient(get_settings())


@lru_cache(maxsize=1)
def authenticator() -> Authenticator:
    s = get_settings()
    return Authenticator(
        client().key_store(),
        cache_s=s.auth_cache_s,
        stale_s=s.auth_stale_s,
        tolerance_s=s.webhook_tolerance_s,
        first_seen=client().first_seen,
        clock=time.time,
    )


# The search clients of each event loop the app's lifespan runs on (one in a served process).
_searches: dict[asyncio.AbstractEventLoop, Searches] = {}


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    # The searches' Redis client belongs to this event loop: made here, closed here.
    loop = asyncio.get_running_loop()
    _searches[loop] = searches = Searches.connect(get_settings())
    try:
        yield
    finally:
        _searches.pop(loop, None)
        await searches.aclose()
        # Closed and forgotten: an app started again in this process (a test client's second
        # lifespan, say) makes new ones rather than use closed drivers.
        authenticator.cache_clear()  # it holds the client's key store
        if client.cache_info().currsize:
            client().close()
            client.cache_clear()
        if default_probes.cache_info().currsize:
            default_probes().close()
            default_probes.cache_clear()


_bearer = HTTPBearer(auto_error=False, description="An API key: engram keys create")
_api_key = APIKeyHeader(name="X-API-Key", auto_error=False, description="The same key (n8n Header Auth)")


def caller(
    request: Request,
    _bearer_key: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
    _header_key: Annotated[str | None, Security(_api_key)],
) -> Caller:
    """Who calls, as ``AuthGuard`` found it (the two parameters only document the schemes)."""
    return caller_of(request.scope)


CallerDep = Annotated[Caller, Depends(caller)]


@asynccontextmanager
async def slots() -> AsyncIterator[TenantSlots]:
    """The tenant slots of this event loop's search clients (their Redis connections)."""
    searches = _searches.get(asyncio.get_running_loop())
    if searches is not None:
        yield searches.slots
        return
    async with Searches.connect(get_settings()) as own:  # as ``search`` below
        yield own.slots


async def search(request: SearchRequest, arrived_at: float) -> SearchResponse:
    """A search through the query queue, awaited on this event loop (the status page's too)."""
    searches = _searches.get(asyncio.get_running_loop())
    if searches is not None:
        return await searches.search(request, arrived_at)
    # Served on an event loop the app's lifespan did not run on (an in-process test client
    # without it): a search client for this request alone, as Redis clients belong to their loop.
    async with Searches.connect(get_settings()) as own:
        return await own.search(request, arrived_at)


@lru_cache(maxsize=1)
def default_probes() -> health.Probes:
    # The workers' broadcast waits out its timeout: slow readings are reused briefly (health_cache).
    return reuse_slow(health.default_probes(get_settings()))


async def probes() -> health.Probes:
    """The probes, as a dependency. Async, so FastAPI does not run it on the shared thread pool,
    which may be busy: /healthz must answer even then."""
    return default_probes()
