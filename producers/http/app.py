"""The HTTP way in: webhooks (n8n and others) post documents, apps search and read status.

This module makes the app: its routes (``routes/``, one module per resource, and the status page,
``ui/``), its error answers (``problems``) and its middleware, outermost first: ``StampArrival``,
``HTTPMetrics``, ``BodyDeadline`` (``slow_clients``), ``AuthGuard`` (``auth``) and ``BodyGuard``
(``wire``, under ``body_policy``). What routes depend on (the client, the caller, the searches)
is in ``deps``; no route imports this module.

``POST /api/documents`` answers 202 with the ids at once and enqueues; nothing is enqueued unless
every document in the body is valid. ``POST /api/memory/semantic-search`` is served through the
``query`` queue and awaited on the event loop (``producers.http.searches``), never on a thread, so
waiting searches cannot starve the other routes or ``/healthz`` (whose probes have threads of
their own, ``producers.http.health``).
"""

from __future__ import annotations

from fastapi import Depends, FastAPI

from producers.http.arrival import StampArrival
from producers.http.auth import CALLER, AuthGuard
from producers.http.bodies import add_body_schemas
from producers.http.body_policy import BodyPolicy, unverified_reads
from producers.http.deps import authenticator, lifespan
from producers.http.problems import ERRORS, add_handlers
from producers.http.routes import admin, documents, entities, health, memories, metrics, search, status
from producers.http.slow_clients import BodyDeadline
from producers.http.ui import page
from producers.http.wire import BodyGuard, one_value_each
from shared.settings import get_settings

# Swagger UI and ReDoc load their scripts from a CDN: served only when asked for
# (ENGRAM_API_DOCS); the OpenAPI document itself, /openapi.json, stays.
_PAGES = get_settings().api_docs

app = FastAPI(
    title="Engram",
    version="0.1.0",
    docs_url="/docs" if _PAGES else None,
    redoc_url="/redoc" if _PAGES else None,
    lifespan=lifespan,
    responses=ERRORS,
    dependencies=[Depends(one_value_each)],
)
app.include_router(admin.router, responses=ERRORS)
# A body is read only for a route that takes it, up to a limit set by whether a key vouched for
# the caller (producers.http.body_policy).
_body_policy = BodyPolicy(
    routes=app.router.routes,
    settings=get_settings,
    verified=lambda scope: CALLER in scope,
    reads=unverified_reads,
)
app.add_middleware(BodyGuard, limit=lambda: get_settings().max_request_bytes, policy=_body_policy)
# Before the body is read: an anonymous request is refused without reading it.
app.add_middleware(AuthGuard, settings=get_settings, authenticator=authenticator)
# Outside both readers of a body: one not complete within ENGRAM_API_BODY_TIMEOUT_S is a 408.
app.add_middleware(BodyDeadline, timeout=lambda: get_settings().api_body_timeout_s)

# Counts every request by its route's template and status, the guard's answers too.
app.add_middleware(metrics.HTTPMetrics, routes=app.router.routes)
app.add_middleware(StampArrival)  # outermost: the moment a request arrives, before anything else
add_handlers(app)

# The routes, in the order they are matched.
app.include_router(health.router)
app.include_router(documents.router)
app.include_router(memories.router)
app.include_router(search.router)
app.include_router(status.router)
# Routes of their own modules, on the same app, guards and error answers.
app.include_router(entities.router)
app.include_router(metrics.router)
app.include_router(page.router)  # HTML, out of the OpenAPI document
add_body_schemas(app)
