"""The HTTP way in: webhooks (n8n and others) post documents, apps search and read status.

``POST /api/documents`` answers 202 with the ids at once and enqueues; nothing is enqueued unless
every document in the body is valid. ``POST /api/memory/semantic-search`` is served through the
``query`` queue and awaited on the event loop (``producers.searches``), never on a thread, so
waiting searches cannot starve the other routes or ``/healthz`` (whose probes have threads of
their own, ``producers.health``).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from functools import lru_cache
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request, Response, Security
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BeforeValidator, Discriminator, Field, Tag, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Route
from starlette.types import Scope

from producers import admin, health, metrics_api, status_page
from producers.arrival import StampArrival, arrived
from producers.auth import CALLER, AuthGuard, caller_of
from producers.bodies import JsonBody, add_body_schemas
from producers.body_policy import BodyPolicy, unverified_reads
from producers.client import EngramClient
from producers.edge import BodyGuard, one_value_each, problem_body
from producers.entities_api import router as entities_router
from producers.health_cache import reuse_slow
from producers.n8n_items import N8nItem, is_n8n_item
from producers.searches import Searches
from producers.slow_clients import BodyDeadline
from producers.tenant_slots import TenantSlots
from shared.api_models import DeleteWhere, DocumentBatch, DocumentList, Problem, ProblemItem, at_most_a_batch
from shared.auth import Authenticator, Caller
from shared.errors import (
    DocumentTooLarge,
    DuplicateDocument,
    Forbidden,
    InvalidInput,
    Overloaded,
    RestoreRunning,
    SearchTimeout,
    ServiceUnavailable,
    TenantBusy,
    Unauthenticated,
)
from shared.models import (
    TENANT_FROM_KEY,
    DeleteResult,
    DocumentBody,
    DocumentIn,
    DocumentStatus,
    Identifier,
    IngestAccepted,
    MemoryPage,
    MemoryRecord,
    Moment,
    SearchBody,
    SearchFilters,
    SearchRequest,
    SearchResponse,
    TenantOverview,
)
from shared.settings import get_settings

log = logging.getLogger(__name__)

# Path ids are checked as the body's are: the same identifier never reads two ways.
DocumentIdPath = Annotated[Identifier, Path(description="The document's id within the tenant.")]
# A memory's id is a UUID (shared/ids.py), so "/api/memories/delete" is never read as memory "delete".
MemoryIdPath = Annotated[uuid.UUID, Path(description="The memory's id.")]
# The tenant in a query string: optional, since the key decides it (an admin key must name it).
TenantQuery = Annotated[Identifier | None, Query(description=TENANT_FROM_KEY)]


# n8n's items (producers/n8n_items.py), counted before validation as the documents are.
ItemList = Annotated[list[N8nItem], BeforeValidator(at_most_a_batch), Field(min_length=1)]


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


def _problem(description: str) -> dict[str, Any]:
    return {"model": Problem, "description": description}


# Every error answer has one shape, ``Problem``; these are documented on every operation.
ERRORS: dict[int | str, dict[str, Any]] = {
    400: _problem("The request cannot be read, or names a host this app does not serve."),
    401: _problem("No API key, an unknown or revoked one, or a webhook signature that does not hold."),
    403: _problem("The API key is not for the tenant named (a tenant key acts for its own only)."),
    404: _problem("No such document or memory for this tenant."),
    413: _problem("A body or a document over its size limit."),
    422: _problem("Invalid input: each field and what is wrong with it in `errors`."),
    429: _problem("The tenant has as many searches or ingest requests in flight as it may; retry."),
    500: _problem("An error of Engram's own (logged)."),
    503: _problem("A service is down: `service` names it (`api`: too many searches waiting, retry)."),
}

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
# the caller (producers.body_policy).
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

# Counts every request by its route's template and status, the guard's answers too.
app.add_middleware(metrics_api.HTTPMetrics, routes=app.router.routes)
app.add_middleware(StampArrival)  # outermost: the moment a request arrives, before anything else


def problem(
    status: int, detail: str, errors: list[ProblemItem] | None = None, service: str | None = None
) -> Response:
    """An error answer, the same bytes as the edge's own (``problem_body``)."""
    return Response(problem_body(detail, errors, service), status, media_type="application/json")


# What a 422 repeats of a request is bounded: the first errors, then a count; each part of a
# field's place cut short (a key of a megabyte is named by its first characters).
ERRORS_SHOWN = 20
PART_SHOWN = 64


def _part(part: Any) -> int | str:
    if isinstance(part, int):
        return part
    text = str(part)
    return text if len(text) <= PART_SHOWN else text[:PART_SHOWN] + "..."


def _invalid(errors: Sequence[Any]) -> Response:
    """Names each invalid field, never echoing its value (it may be anything)."""
    shown = [
        ProblemItem(
            loc=[_part(part) for part in error.get("loc", ())],
            msg=str(error.get("msg", "invalid"))[:300],
            type=str(error.get("type", "invalid")),
        )
        for error in errors[:ERRORS_SHOWN]
    ]
    summary = "; ".join(f"{'.'.join(map(str, e.loc))}: {e.msg}" for e in shown[:5])
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return problem(422, f"invalid request: {summary}{more}", shown)


@app.exception_handler(RequestValidationError)
async def invalid_request(_: Request, exc: RequestValidationError) -> Response:
    return _invalid(exc.errors())


@app.exception_handler(ValidationError)
async def invalid_inside(_: Request, exc: ValidationError) -> Response:
    """A model a route builds from what it was given (filters, say) refused it: the request's
    fault, a 422 as if the route's own parameters had said so, never a 500."""
    return _invalid(exc.errors(include_url=False, include_input=False))


@app.exception_handler(StarletteHTTPException)
async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
    response = problem(exc.status_code, str(exc.detail))
    response.headers.update(exc.headers or {})
    if exc.status_code == 405:
        response.headers["Allow"] = _allowed_methods(request.scope)
    return response


def _allowed_methods(scope: Scope) -> str:
    """Every method some route takes at this path: Starlette's own 405 names only the methods of
    the first route that matched the path (GET of three routes on one path, say)."""
    methods: set[str] = set()
    for route in app.router.routes:
        if isinstance(route, Route) and route.methods and route.matches(scope)[0] is not Match.NONE:
            methods |= route.methods
    return ", ".join(sorted(methods))


@app.exception_handler(InvalidInput)
async def invalid_input(_: Request, exc: InvalidInput) -> Response:
    status = 413 if isinstance(exc, DocumentTooLarge) else 409 if isinstance(exc, DuplicateDocument) else 422
    return problem(status, str(exc))


@app.exception_handler(Unauthenticated)
async def unauthenticated(_: Request, exc: Unauthenticated) -> Response:
    response = problem(401, str(exc))
    response.headers["www-authenticate"] = 'Bearer realm="engram"'
    return response


@app.exception_handler(Forbidden)
async def forbidden(_: Request, exc: Forbidden) -> Response:
    return problem(403, str(exc))


@app.exception_handler(RestoreRunning)
async def restore_running(_: Request, exc: RestoreRunning) -> Response:
    return problem(409, str(exc))


@app.exception_handler(ServiceUnavailable)
async def service_unavailable(_: Request, exc: ServiceUnavailable) -> Response:
    return problem(503, str(exc), service=exc.service)


@app.exception_handler(Overloaded)
async def overloaded(_: Request, exc: Overloaded) -> Response:
    response = problem(503, str(exc), service=exc.service)
    response.headers["Retry-After"] = "1"
    return response


@app.exception_handler(TenantBusy)
async def tenant_busy(_: Request, exc: TenantBusy) -> Response:
    response = problem(429, str(exc))
    response.headers["Retry-After"] = "1"
    return response


@app.exception_handler(SearchTimeout)
async def search_timeout(_: Request, exc: SearchTimeout) -> Response:
    return problem(504, str(exc))


@app.exception_handler(Exception)
async def internal_error(_: Request, exc: Exception) -> Response:
    log.exception("unhandled error: %s", exc)
    return problem(500, f"internal error ({type(exc).__name__}); it is logged")


@lru_cache(maxsize=1)
def default_probes() -> health.Probes:
    # The workers' broadcast waits out its timeout: slow readings are reused briefly (health_cache).
    return reuse_slow(health.default_probes(get_settings()))


async def probes() -> health.Probes:
    """The probes, as a dependency. Async, so FastAPI does not run it on the shared thread pool,
    which may be busy: /healthz must answer even then."""
    return default_probes()


async def _is_admin(request: Request) -> bool:
    """Whether an open route's caller sent an admin key (a wrong or absent key is no error here)."""
    if get_settings().auth_mode == "local":
        return True
    token = request.headers.get("x-api-key") or request.headers.get("authorization", "").removeprefix(
        "Bearer "
    )
    if not token:
        return False
    try:
        return (await run_in_threadpool(authenticator().bearer, token)).admin
    except (Unauthenticated, ServiceUnavailable):
        return False


@app.get("/healthz", response_model=health.Health, responses={503: {"model": health.Health}})
async def healthz(checks: Annotated[health.Probes, Depends(probes)], request: Request) -> JSONResponse:
    """Each service, checked at once within about a second; 503 when Redis is down. Anyone sees
    the services' names and states; what went wrong (addresses, paths, hosts) only an admin key."""
    report = await health.check(checks)
    if not await _is_admin(request):
        report = report.without_details()
    return JSONResponse(status_code=report.http_status, content=report.model_dump(mode="json"))


def _body_kind(body: Any) -> str:
    """Which of the forms a body is, by its shape: errors then speak of that form alone."""
    if isinstance(body, list):
        return "items" if any(is_n8n_item(element) for element in body) else "list"
    if is_n8n_item(body):
        return "item"
    return "batch" if isinstance(body, dict) and "documents" in body else "document"


IngestBody = Annotated[
    Annotated[DocumentBody, Tag("document")]
    | Annotated[DocumentBatch, Tag("batch")]
    | Annotated[DocumentList, Tag("list")]
    | Annotated[N8nItem, Tag("item")]
    | Annotated[ItemList, Tag("items")],
    Discriminator(_body_kind),
]
# Bodies are parsed and validated off the event loop when large (producers.bodies).
_ingest_body = JsonBody(IngestBody, "Body")
_document_body = JsonBody(DocumentBody, "DocumentBody")
_search_body = JsonBody(SearchBody, "SearchBody")


@app.post(
    "/api/documents",
    status_code=202,
    response_model=IngestAccepted,
    responses={409: _problem("The same document twice in one request (two versions of it at once).")},
    openapi_extra=_ingest_body.openapi_extra,
)
async def ingest(
    body: Annotated[
        DocumentBody | DocumentBatch | N8nItem | list[DocumentBody] | list[N8nItem], Depends(_ingest_body)
    ],
    who: CallerDep,
) -> IngestAccepted:
    """One document, a list of them, ``{"documents": [...]}``, or n8n's items (``[{"json":
    {...}}, ...]``, each item's ``json`` a document). With a tenant key, every document is the
    key's tenant's: one naming another tenant refuses the whole request (403). A document stored
    exactly as given is not enqueued again: the answer lists it ``unchanged`` and its status says
    so; ``force`` (on the batch or on a document) redoes the request."""
    if isinstance(body, DocumentBody):
        bodies = [body]
    elif isinstance(body, DocumentBatch):
        bodies = body.documents
    elif isinstance(body, N8nItem):
        bodies = [body.document]
    else:
        bodies = [item.document if isinstance(item, N8nItem) else item for item in body]
    documents = [document.for_tenant(who.tenant_for(document.user_id)) for document in bodies]
    limit = get_settings().max_batch_documents
    if len(documents) > limit:
        raise InvalidInput(
            f"{len(documents)} documents in one request; the limit is {limit} (ENGRAM_MAX_BATCH_DOCUMENTS)"
        )
    force = (isinstance(body, DocumentBatch) and body.force) or any(document.force for document in bodies)
    return await _ingest(documents, force)


INGEST_LAPSE_S = 120.0
"""An ingest slot a killed process never gave back is free again after this."""


async def _ingest(documents: list[DocumentIn], force: bool) -> IngestAccepted:
    """Enqueued on the shared thread pool, while the tenant holds one of its ingest slots (so one
    tenant's flood of posts cannot take every thread from the others)."""
    limit = get_settings().tenant_max_ingests
    async with _slots() as slots, AsyncExitStack() as held:
        for tenant in sorted({document.user_id for document in documents}):  # an admin's batch: each
            await held.enter_async_context(slots.held("ingest", tenant, limit, INGEST_LAPSE_S))
        return await run_in_threadpool(client().ingest, documents, None, force)


@app.get("/api/documents/{document_id:path}", response_model=DocumentStatus)
async def document_status(
    document_id: DocumentIdPath, who: CallerDep, user_id: TenantQuery = None
) -> DocumentStatus:
    user_id = who.tenant_for(user_id)
    status = await run_in_threadpool(client().status, user_id, document_id)
    if status.state == "unknown":
        raise HTTPException(status_code=404, detail=f"no document {document_id!r} for user {user_id!r}")
    return status


@app.put(
    "/api/documents/{document_id:path}",
    status_code=202,
    response_model=IngestAccepted,
    responses={409: _problem("The body names another document (its id is not the path's).")},
    openapi_extra=_document_body.openapi_extra,
)
async def update_document(
    document_id: DocumentIdPath, body: Annotated[DocumentBody, Depends(_document_body)], who: CallerDep
) -> IngestAccepted:
    """Replaces a document: re-chunked and re-embedded at a new version, its old chunks removed.
    The path names the document; an ``id`` in the body, if any, must be the same."""
    if body.id is not None and body.id != document_id:
        raise HTTPException(409, f"the body's id {body.id!r} is not the path's {document_id!r}")
    document = body.for_tenant(who.tenant_for(body.user_id)).model_copy(update={"id": document_id})
    return await _ingest([document], body.force)


@app.delete("/api/documents/{document_id:path}", response_model=DeleteResult)
async def delete_document(
    document_id: DocumentIdPath, who: CallerDep, user_id: TenantQuery = None
) -> DeleteResult:
    """Gone from search at once; ``qdrant_confirmed`` says whether the backup dropped it too."""
    user_id = who.tenant_for(user_id)
    result = await run_in_threadpool(client().delete_document, user_id, document_id)
    if result.memories == 0:
        raise HTTPException(status_code=404, detail=f"no document {document_id!r} for user {user_id!r}")
    return result


@app.get("/api/memories", response_model=MemoryPage)
async def list_memories(
    who: CallerDep,
    user_id: TenantQuery = None,
    project_id: Identifier | None = None,
    session_id: Identifier | None = None,
    document_id: Identifier | None = None,
    memory_type: Annotated[list[Identifier] | None, Query(max_length=32)] = None,
    tag: Annotated[list[Identifier] | None, Query(max_length=32)] = None,
    from_date: Moment | None = None,
    to_date: Moment | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: str | None = None,
) -> MemoryPage:
    """The tenant's memories matching the filters, a page at a time (``next_cursor``)."""
    user_id = who.tenant_for(user_id)
    filters = SearchFilters(
        project_id=project_id,
        session_id=session_id,
        document_id=document_id,
        memory_types=memory_type,
        tags=tag,
        from_date=from_date,
        to_date=to_date,
    )
    return await run_in_threadpool(client().list_memories, user_id, filters, limit, cursor)


@app.get("/api/memories/{memory_id:uuid}", response_model=MemoryRecord)
async def get_memory(memory_id: MemoryIdPath, who: CallerDep, user_id: TenantQuery = None) -> MemoryRecord:
    user_id = who.tenant_for(user_id)
    memory = await run_in_threadpool(client().get_memory, user_id, str(memory_id))
    if memory is None:
        raise HTTPException(status_code=404, detail=f"no memory {str(memory_id)!r} for user {user_id!r}")
    return memory


@app.delete("/api/memories/{memory_id:uuid}", response_model=DeleteResult)
async def delete_memory(memory_id: MemoryIdPath, who: CallerDep, user_id: TenantQuery = None) -> DeleteResult:
    user_id = who.tenant_for(user_id)
    result = await run_in_threadpool(client().delete_memory, user_id, str(memory_id))
    if result.memories == 0:
        raise HTTPException(status_code=404, detail=f"no memory {str(memory_id)!r} for user {user_id!r}")
    return result


_delete_body = JsonBody(DeleteWhere, "DeleteWhere")


@app.post("/api/memories/delete", response_model=DeleteResult, openapi_extra=_delete_body.openapi_extra)
async def delete_where(
    request: Annotated[DeleteWhere, Depends(_delete_body)], who: CallerDep
) -> DeleteResult:
    """Deletes the tenant's memories matching the filters (only that tenant's)."""
    return await run_in_threadpool(
        client().delete_where, who.tenant_for(request.user_id), request.filters, request.everything
    )


@app.post(
    "/api/memory/semantic-search",
    response_model=SearchResponse,
    responses={504: _problem("No answer within ENGRAM_SEARCH_TIMEOUT_S of the request's arrival.")},
    openapi_extra=_search_body.openapi_extra,
)
async def semantic_search(
    body: Annotated[SearchBody, Depends(_search_body)], who: CallerDep, http: Request
) -> SearchResponse:
    """Waits at most ENGRAM_SEARCH_TIMEOUT_S from the request's arrival (504 after it); 503 with
    ``Retry-After`` when ENGRAM_API_MAX_PENDING_SEARCHES already wait in this process."""
    return await search(body.for_tenant(who.tenant_for(body.user_id)), arrived(http))


@asynccontextmanager
async def _slots() -> AsyncIterator[TenantSlots]:
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


@app.get("/api/status", response_model=TenantOverview | dict[str, Any])
async def overview(who: CallerDep, user_id: TenantQuery = None) -> TenantOverview | dict[str, Any]:
    """A tenant key sees its own tenant's counts; an admin key one tenant's (``user_id``) or the
    whole store's: queues, sync health, the reconciler's last pass."""
    if who.tenant is not None or user_id is not None:
        return await run_in_threadpool(client().tenant_overview, who.tenant_for(user_id))
    return await run_in_threadpool(client().overview)


# Routes of their own modules, on the same app, guards and error answers.
app.include_router(entities_router)
app.include_router(metrics_api.router)
app.include_router(status_page.router)  # HTML, out of the OpenAPI document
add_body_schemas(app)
