"""When a request reached the app: the clock a search's timeout runs on.

``StampArrival`` is a pure ASGI middleware, outermost, that notes ``time.monotonic()`` in the
request's state before anything else (reading the body, validation, a free thread) can delay
it; ``arrived`` reads it back in a route.
"""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["StampArrival", "arrived"]

_KEY = "engram_arrived"


class StampArrival:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope.setdefault("state", {})[_KEY] = time.monotonic()
        await self.app(scope, receive, send)


def arrived(request: Request) -> float:
    """The request's arrival (``time.monotonic()``); now, if it was not stamped."""
    stamped = request.scope.get("state", {}).get(_KEY)
    return stamped if isinstance(stamped, float) else time.monotonic()
