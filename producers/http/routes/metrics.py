"""``GET /metrics``: Prometheus's text format, for an admin key only (a tenant key gets 403, no key
401: ``AuthGuard`` checks ``/metrics`` as it checks ``/api``). Prometheus sends the key as a
bearer token (``authorization: {credentials_file: ...}`` in its scrape config).

What it serves is shared/metrics.py's: every process's counters and histograms (the app's, each
worker's) merged from the multiprocess files, and gauges read from Redis and Neo4j at scrape time.
``HTTPMetrics`` counts each request of this app by its route's template (``/api/documents/{document_id}``),
never its raw path.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import lru_cache

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from producers.http.auth import caller_of
from producers.http.deps import client as app_client
from shared import metrics
from shared.errors import EngramError, Forbidden
from shared.models import utc_now
from shared.settings import get_settings

router = APIRouter(tags=["metrics"])


def read_stores() -> metrics.Readings:
    """Each store read on its own: Neo4j down still leaves the queue depths (and says so)."""
    client = app_client()
    readings = metrics.Readings()
    try:
        readings.queues = client.queue_depths()
        readings.documents = client.document_states()
        readings.up["redis"] = True
    except EngramError:
        readings.up["redis"] = False
    try:
        overview = client.overview()
        readings.vector_sync = overview["vector_sync"]
        health = overview["sync_health"]
        oldest = health["oldest_pending"]
        readings.oldest_pending_age_s = (utc_now() - oldest).total_seconds() if oldest else 0.0
        readings.tombstones = health["tombstones"]
        stores = overview["stores"]
        readings.primary_lost = bool(stores["primary_lost"])
        readings.neo4j_memories = stores["neo4j_memories"]
        readings.qdrant_points = stores["qdrant_points"]
        readings.up["neo4j"] = True
    except EngramError:
        readings.up["neo4j"] = False
    return readings


@lru_cache(maxsize=1)
def _stores() -> metrics.StoreCollector:
    return metrics.StoreCollector(read_stores, get_settings().metrics_cache_s)


def store_readings() -> metrics.Readings:
    """The stores' readings as /metrics last read them (within ENGRAM_METRICS_CACHE_S): the
    status page shows the same figures without reading the stores on each load."""
    return _stores().readings()


@router.get("/metrics", response_class=Response, include_in_schema=False)
async def scrape(request: Request) -> Response:
    if not caller_of(request.scope).admin:
        raise Forbidden("an admin key is required for /metrics")
    registry = metrics.registry(get_settings(), _stores())
    body = await run_in_threadpool(generate_latest, registry)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


def route_template(routes: list[BaseRoute], scope: Scope) -> str:
    """The template of the route that takes this request, whatever answered it (the guard's 401
    too); ``unmatched`` for a path no route takes, so a scan of random paths makes no series."""
    found = scope.get("route")
    path = getattr(found, "path", None)
    if isinstance(path, str):
        return path
    partial = None
    for route in flat_routes(routes):
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return str(getattr(route, "path", "unmatched"))
        if match is Match.PARTIAL and partial is None:
            partial = str(getattr(route, "path", "unmatched"))  # the path, another method
    return partial or "unmatched"


def flat_routes(routes: list[BaseRoute]) -> Iterator[BaseRoute]:
    """The app's routes, those of included routers among them (FastAPI keeps an included router
    as one entry of the app's routes; its routes carry their own prefix)."""
    for route in routes:
        inner = getattr(getattr(route, "original_router", None), "routes", None)
        if isinstance(inner, list):
            yield from flat_routes(inner)
        else:
            yield route


class HTTPMetrics:
    """Counts each HTTP request by method, route template and status, and times it."""

    def __init__(self, app: ASGIApp, routes: list[BaseRoute]) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            method = scope["method"] if scope["method"] in _METHODS else "other"
            route = route_template(self.routes, scope)
            metrics.HTTP_REQUESTS.labels(method, route, str(status)).inc()
            metrics.HTTP_SECONDS.labels(method, route).observe(time.perf_counter() - started)


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
