"""The MCP server over streamable HTTP (the ``mcp`` SDK's own transport), for agents elsewhere:

    engram mcp --http --host 127.0.0.1 --port 8765     # then http://127.0.0.1:8765/mcp

Every request carries an API key, as on the HTTP app (``Authorization: Bearer <key>`` or
``X-API-Key: <key>``), and the key decides the tenant of every tool call that request makes: a
tenant key acts for its own tenant only; an admin key is refused (403), since an agent's memory is
one tenant's. No key or a wrong one is a 401 before the MCP server sees the request; the Host must
be one of ``ENGRAM_ALLOWED_HOSTS``. With ``ENGRAM_AUTH_MODE=local`` there are no keys: loopback
clients only, and ``--user`` names the tenant.

The server is stateless (``stateless_http``): each request stands alone, so no session opened with
one key can be used with another, and any number of these processes may serve behind a balancer.
Searches go through the query queue and are awaited on the event loop (``producers.http.searches``),
as the HTTP app's are; the other tools call the blocking client on worker threads.

It has the HTTP app's limits on slow and large requests, from the same modules: headers within
``ENGRAM_API_HEADER_TIMEOUT_S`` (``TimedHttpToolsProtocol``), the body within
``ENGRAM_API_BODY_TIMEOUT_S`` (``BodyDeadline``), and, once the key is known, the body bounded
and parsed strictly (``BodyGuard``: no duplicate key, no ``NaN``, nesting past Python's
recursion refused with a 422), on a worker thread when large. The bound is ``mcp_body_limit``:
what the largest tool call (``remember`` of a ``ENGRAM_MAX_DOCUMENT_BYTES`` text, every character
escaped) can need, so the SDK's own parse of what passes stays short on the event loop. A tool
refuses arguments it does not take (``producers.mcp.server``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
from mcp.server.fastmcp import Context
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send

from producers.client import EngramClient
from producers.http.auth import (
    CALLER,
    CHALLENGE,
    Ambiguous,
    api_key_of,
    caller_of,
    headers_of,
    host_allowed,
    repeated_in,
)
from producers.http.searches import Searches
from producers.http.slow_clients import BodyDeadline
from producers.http.wire import BodyGuard, answer
from producers.mcp.server import build_server
from shared.auth import Authenticator, Caller
from shared.errors import ServiceUnavailable, Unauthenticated
from shared.models import SearchRequest, SearchResponse
from shared.settings import Settings, is_loopback

PATH = "/mcp"
ENVELOPE_BYTES = 64 * 1024
"""A tool call's JSON-RPC envelope and its arguments other than the text."""


def mcp_body_limit(settings: Settings) -> int:
    """The largest body a tool call can need: a document's text with each byte escaped
    (``\\u00XX``, 6 bytes), and its envelope; never more than ``ENGRAM_MAX_REQUEST_BYTES``."""
    return min(settings.max_request_bytes, 6 * settings.max_document_bytes + ENVELOPE_BYTES)


ONE_EACH = ("authorization", "x-api-key", "host")


class KeyGuard:
    """Who calls, before the MCP transport reads a byte of the body: the caller is put in the
    ASGI scope, where the tools find it (``tenant_of_request``)."""

    def __init__(
        self, app: ASGIApp, settings: Settings, authenticator: Authenticator, local_tenant: str | None
    ) -> None:
        self.app = app
        self.settings = settings
        self.authenticator = authenticator
        self.local_tenant = local_tenant

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        repeated = repeated_in(scope, ONE_EACH)
        if repeated:
            await answer(send, 400, f"a header that must appear once appears twice: {', '.join(repeated)}")
            return
        headers = headers_of(scope)
        if not host_allowed(headers.get("host", ""), self.settings.allowed_hosts):
            await answer(send, 400, "the Host header names a host this server does not serve")
            return
        if self.settings.auth_mode == "local":
            client = scope.get("client")
            if client is None or not is_loopback(str(client[0])):
                await answer(send, 403, "ENGRAM_AUTH_MODE=local answers loopback clients only")
                return
            scope[CALLER] = Caller(key_id=None, tenant=self.local_tenant)
            await self.app(scope, receive, send)
            return
        try:
            caller = await anyio.to_thread.run_sync(self.authenticator.bearer, api_key_of(headers))
        except Ambiguous as exc:
            await answer(send, 400, str(exc))
            return
        except Unauthenticated as exc:
            await answer(send, 401, str(exc), extra=CHALLENGE)
            return
        except ServiceUnavailable as exc:
            await answer(send, 503, f"API keys cannot be checked: {exc}", service=exc.service)
            return
        if caller.admin:
            await answer(
                send,
                403,
                "an agent's memory is one tenant's: use a tenant key (engram keys create --user ...)",
            )
            return
        scope[CALLER] = caller
        await self.app(scope, receive, send)


def tenant_of_request(ctx: Context[Any, Any, Any]) -> str:
    """The tenant of the API key of the request that carried this tool call."""
    request = ctx.request_context.request
    scope = getattr(request, "scope", None)
    tenant = caller_of(scope or {}).tenant
    if tenant is None:  # KeyGuard lets no such request through
        raise Unauthenticated("a tenant key is required")
    return tenant


def build_app(
    settings: Settings,
    client: EngramClient,
    authenticator: Authenticator,
    local_tenant: str | None = None,
    on_close: Callable[[], None] | None = None,
) -> ASGIApp:
    """The ASGI app: ``KeyGuard`` in front of the MCP server's streamable HTTP endpoint."""
    searches: dict[str, Searches] = {}

    async def search(request: SearchRequest) -> SearchResponse:
        return await searches["loop"].search(request, time.monotonic())

    server = build_server(
        client,
        tenant_of_request,
        search=search,
        stateless_http=True,
        json_response=True,
        streamable_http_path=PATH,
        max_request_body_size=mcp_body_limit(settings),
        # The Host is checked by KeyGuard against ENGRAM_ALLOWED_HOSTS, as the HTTP app checks it.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    mcp_app = server.streamable_http_app()

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        # The searches' Redis clients belong to this event loop: made here, closed here.
        searches["loop"] = Searches.connect(settings)
        try:
            async with server.session_manager.run():
                yield
        finally:
            await searches.pop("loop").aclose()
            if on_close is not None:
                on_close()

    app = Starlette(routes=list(mcp_app.routes), lifespan=lifespan)
    # The key first, then the body: bounded in time, then in size and strictly parsed.
    guarded = BodyGuard(app, limit=lambda: mcp_body_limit(settings))
    timed = BodyDeadline(guarded, timeout=lambda: settings.api_body_timeout_s)
    return KeyGuard(timed, settings, authenticator, local_tenant)


def serve(settings: Settings, host: str, port: int, local_tenant: str | None = None) -> None:
    """Serves until stopped (``engram mcp --http`` checks the arguments)."""
    import uvicorn

    client = EngramClient(settings)
    client.ping()  # Redis unreachable: one clear line now, not an error on every call
    authenticator = Authenticator(
        client.key_store(),
        cache_s=settings.auth_cache_s,
        stale_s=settings.auth_stale_s,
        tolerance_s=settings.webhook_tolerance_s,
        first_seen=client.first_seen,
        clock=time.time,
    )
    app = build_app(settings, client, authenticator, local_tenant, on_close=client.close)
    print(f"engram mcp: streamable HTTP on http://{host}:{port}{PATH}", flush=True)
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level="warning",
        # strict framing and a deadline on each request's headers, as engram serve
        http="producers.http.slow_clients:TimedHttpToolsProtocol",
        lifespan="on",
        limit_concurrency=settings.api_max_connections,
        timeout_keep_alive=settings.api_keep_alive_s,
    )
