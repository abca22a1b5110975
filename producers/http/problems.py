"""Every error answer of the HTTP app has one shape, ``Problem`` (the edge's own bytes, made by
``wire.problem_body``): the statuses documented on every operation (``ERRORS``), and the
exception handlers that turn Engram's errors, FastAPI's validation and Starlette's HTTP errors into
it. A 422 names each invalid field without echoing its value; a 405 names every method the path
takes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match, Route
from starlette.types import Scope

from producers.http.routes.metrics import flat_routes
from producers.http.wire import problem_body
from shared.api_models import Problem, ProblemItem
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

log = logging.getLogger(__name__)


def documented(description: str) -> dict[str, Any]:
    """An error answer as the OpenAPI document lists it: a ``Problem``, and what it means here."""
    return {"model": Problem, "description": description}


# Every error answer has one shape, ``Problem``; these are documented on every operation.
ERRORS: dict[int | str, dict[str, Any]] = {
    400: documented("The request cannot be read, or names a host this app does not serve."),
    401: documented("No API key, an unknown or revoked one, or a webhook signature that does not hold."),
    403: documented("The API key is not for the tenant named (a tenant key acts for its own only)."),
    404: documented("No such document or memory for this tenant."),
    413: documented("A body or a document over its size limit."),
    422: documented("Invalid input: each field and what is wrong with it in `errors`."),
    429: documented("The tenant has as many searches or ingest requests in flight as it may; retry."),
    500: documented("An error of Engram's own (logged)."),
    503: documented("A service is down: `service` names it (`api`: too many searches waiting, retry)."),
}


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


def add_handlers(app: FastAPI) -> None:
    """The exception handlers, on ``app``: each error a ``Problem`` of its status."""

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
            response.headers["Allow"] = _allowed_methods(app.router.routes, request.scope)
        return response

    @app.exception_handler(InvalidInput)
    async def invalid_input(_: Request, exc: InvalidInput) -> Response:
        status = (
            413 if isinstance(exc, DocumentTooLarge) else 409 if isinstance(exc, DuplicateDocument) else 422
        )
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


def _allowed_methods(routes: list[BaseRoute], scope: Scope) -> str:
    """Every method some route takes at this path: Starlette's own 405 names only the methods of
    the first route that matched the path (GET of three routes on one path, say). The routes of
    included routers count as the app's own."""
    methods: set[str] = set()
    for route in flat_routes(routes):
        if isinstance(route, Route) and route.methods and route.matches(scope)[0] is not Match.NONE:
            methods |= route.methods
    return ", ".join(sorted(methods))
