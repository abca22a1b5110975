"""The HTTP SDK for apps: Engram's API over httpx, typed with the server's own models.

    from producers.sdk import EngramHTTP

    with EngramHTTP("http://127.0.0.1:8000", api_key="egk_...") as engram:
        accepted = engram.ingest({"text": "Maya moved to Lisbon in May.", "session_id": "chat-1"})
        engram.wait(accepted)                       # until every document is done or failed
        found = engram.search("where does Maya live", token_budget=500)
        print(found.context)

``AsyncEngramHTTP`` is the same with ``await``. The API key goes in ``X-API-Key`` (or
``Authorization: Bearer`` with ``auth="bearer"``); a tenant key decides the tenant, so
``user_id`` is needed only with an admin key.

An answer that means "not now" (429, 503) is retried a few times, waiting what its ``Retry-After``
asks (``shared.retry.HttpRetry``); any other error answer raises an ``EngramHTTPError`` of its
status (``NotFound``, ``Unauthorized``, ``InvalidRequest``, ...) carrying the status, the
``detail`` line, each invalid field (``errors``) and, for a 503, the ``service`` that is down.
A document or search the models refuse raises pydantic's ``ValidationError`` before anything is
sent; a connection that fails raises httpx's own ``TransportError`` (not retried: the request may
have been taken).

Importing this module loads httpx and pydantic and the models, never Celery, the Neo4j driver,
Redis or onnxruntime: an app installs ``engram[client]`` and talks to a served Engram.
"""

from producers.sdk.aio import AsyncEngramHTTP
from producers.sdk.errors import (
    Conflict,
    EngramHTTPError,
    Forbidden,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    ServerError,
    ServiceUnavailable,
    TimedOut,
    TooManyRequests,
    Unauthorized,
    WaitTimeout,
)
from producers.sdk.sync import EngramHTTP

__all__ = [
    "AsyncEngramHTTP",
    "Conflict",
    "EngramHTTP",
    "EngramHTTPError",
    "Forbidden",
    "InvalidRequest",
    "NotFound",
    "PayloadTooLarge",
    "ServerError",
    "ServiceUnavailable",
    "TimedOut",
    "TooManyRequests",
    "Unauthorized",
    "WaitTimeout",
]
