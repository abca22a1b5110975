"""The SDK's errors: one class per kind of error answer, read from the app's ``Problem`` body, so
an app catches ``NotFound`` or ``TooManyRequests`` rather than reading statuses."""

from __future__ import annotations

from collections.abc import Sequence

import httpx
from pydantic import ValidationError

from shared.api_models import Problem, ProblemItem
from shared.models import DocumentStatus


class EngramHTTPError(Exception):
    """An error answer of the app: its status, its one-line ``detail``, each invalid field
    (``errors``, for a 422) and the ``service`` that is down (for a 503)."""

    def __init__(
        self,
        status: int,
        detail: str,
        errors: Sequence[ProblemItem] = (),
        service: str | None = None,
        retry_after: str | None = None,
    ) -> None:
        super().__init__(status, detail)
        self.status = status
        self.detail = detail
        self.errors = list(errors)
        self.service = service
        self.retry_after = retry_after

    def __str__(self) -> str:
        return f"{self.status}: {self.detail}"


class ClientError(EngramHTTPError):
    """A 4xx: the request, its key or its target is wrong; sending it again will not help."""


class InvalidRequest(ClientError):
    """400 (unreadable, a header twice, a host not served) or 422 (a field is invalid: ``errors``)."""


class Unauthorized(ClientError):
    """401: no API key, or an unknown or revoked one."""


class Forbidden(ClientError):
    """403: the key is not for the tenant named."""


class NotFound(ClientError):
    """404: no such document, memory or entity for this tenant."""


class Conflict(ClientError):
    """409: the same document twice in one request, or a body naming another document."""


class PayloadTooLarge(ClientError):
    """413: a body or a document over its size limit."""


class TooManyRequests(ClientError):
    """429, still refused after the retries."""


class ServerError(EngramHTTPError):
    """A 5xx: Engram's own error (logged on the server)."""


class ServiceUnavailable(ServerError):
    """503, still after the retries: ``service`` names what is down (``api``: too many searches wait)."""


class TimedOut(ServerError):
    """504: no query worker answered within the app's ENGRAM_SEARCH_TIMEOUT_S."""


class WaitTimeout(TimeoutError):
    """``wait`` gave up before every document was final; ``statuses`` are the last ones read."""

    def __init__(self, message: str, statuses: Sequence[DocumentStatus]) -> None:
        super().__init__(message)
        self.statuses = list(statuses)


_BY_STATUS: dict[int, type[EngramHTTPError]] = {
    400: InvalidRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    422: InvalidRequest,
    429: TooManyRequests,
    503: ServiceUnavailable,
    504: TimedOut,
}


def error_of(response: httpx.Response) -> EngramHTTPError:
    """The typed error of an error answer, its body read as the app's ``Problem``."""
    try:
        problem = Problem.model_validate_json(response.content)
    except ValidationError:
        text = response.text.strip()[:300] or response.reason_phrase
        problem = Problem(detail=text)
    kind = _BY_STATUS.get(response.status_code) or (
        ServerError if response.status_code >= 500 else ClientError
    )
    return kind(
        response.status_code,
        problem.detail,
        problem.errors,
        problem.service,
        response.headers.get("retry-after"),
    )
