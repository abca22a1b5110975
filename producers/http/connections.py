"""Connection caps of the served app: one client address cannot hold every connection, and a
flood of connections that send no whole request leaves room for those that do (``/healthz``).

uvicorn's own bound (``limit_concurrency``) answers 503 to every request once that many
connections are open, whoever holds them: 1,010 half-open sockets from one client made
everything, ``/healthz`` too, a 503 until their header timeout closed them. ``GatedHttpToolsProtocol``
(``engram serve`` runs it) counts connections itself, per process:

- **Per client address**: past ``ENGRAM_API_MAX_CONNECTIONS_PER_CLIENT`` open connections from
  one address, a new one is answered 503 (``Retry-After``) and closed at once. Behind a reverse
  proxy every connection comes from the proxy: raise it to ``ENGRAM_API_MAX_CONNECTIONS`` there.
- **Global**: past ``ENGRAM_API_MAX_CONNECTIONS``, the oldest *idle* connection (one with no
  request in progress: half-open, or kept alive between requests) is closed to make room, so a
  flood of idle sockets costs only themselves. Only when every connection has a request in
  progress is the new one refused (503). A client whose idle kept-alive connection is closed
  opens another, as HTTP lets a server close an idle connection at any time.

uvicorn's ``limit_concurrency`` stays, at twice the cap, as a backstop for requests whose task
outlives its connection; the connections themselves never reach it.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections import Counter, OrderedDict
from typing import Any

from producers.http.slow_clients import TimedHttpToolsProtocol
from producers.http.wire import problem_body
from shared.settings import get_settings

__all__ = ["Gate", "GatedHttpToolsProtocol"]

LOG_EVERY_S = 10.0


class Gate:
    """The connections of one server (one process): how many each address holds, and which are
    idle, oldest first. Called on the event loop only."""

    def __init__(self, cap: int, per_client: int) -> None:
        self.cap = cap
        self.per_client = per_client
        self.by_address: Counter[str] = Counter()
        self.idle: OrderedDict[GatedHttpToolsProtocol, None] = OrderedDict()
        self.open = 0
        self.refusals = 0
        self.logged_at = -LOG_EVERY_S

    def admit(self, connection: GatedHttpToolsProtocol) -> str | None:
        """Counts a new connection in; the reason it is refused, or None when it is taken
        (after closing the oldest idle connection when at the cap)."""
        if self.by_address[connection.address] >= self.per_client:
            return f"this client holds {self.per_client} connections (ENGRAM_API_MAX_CONNECTIONS_PER_CLIENT)"
        if self.open >= self.cap:
            if not self.idle:
                return f"{self.cap} connections all have a request in progress (ENGRAM_API_MAX_CONNECTIONS)"
            oldest, _ = self.idle.popitem(last=False)
            oldest.evict()
        self.open += 1
        self.by_address[connection.address] += 1
        self.idle[connection] = None
        return None

    def refused(self, logger: logging.Logger, reason: str) -> None:
        """Logs a refusal, at most one line every ``LOG_EVERY_S`` (a flood is thousands a second)."""
        self.refusals += 1
        now = time.monotonic()
        if now - self.logged_at >= LOG_EVERY_S:
            logger.warning(
                "%d connections refused in %.0f s; the last: %s.", self.refusals, LOG_EVERY_S, reason
            )
            self.logged_at, self.refusals = now, 0

    def busy(self, connection: GatedHttpToolsProtocol) -> None:
        self.idle.pop(connection, None)

    def rest(self, connection: GatedHttpToolsProtocol) -> None:
        if connection.counted:
            self.idle[connection] = None
            self.idle.move_to_end(connection)

    def leave(self, connection: GatedHttpToolsProtocol) -> None:
        self.idle.pop(connection, None)
        if connection.counted:
            connection.counted = False
            self.open -= 1
            self.by_address[connection.address] -= 1
            if self.by_address[connection.address] <= 0:
                del self.by_address[connection.address]


# One gate per uvicorn server (its ServerState), so per process.
_gates: weakref.WeakKeyDictionary[Any, Gate] = weakref.WeakKeyDictionary()


def _gate_of(server_state: Any) -> Gate:
    gate = _gates.get(server_state)
    if gate is None:
        settings = get_settings()
        gate = _gates[server_state] = Gate(
            settings.api_max_connections, settings.api_max_connections_per_client
        )
    return gate


class GatedHttpToolsProtocol(TimedHttpToolsProtocol):
    """The timed httptools protocol, its connections counted by the server's ``Gate``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gate = _gate_of(self.server_state)
        self.counted = False
        self.address = ""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.address = self.client[0] if self.client else ""
        refused = self.gate.admit(self)
        if refused is not None:
            self.gate.refused(self.logger, refused)
            body = problem_body(f"too many connections: {refused}; retry later", service="api")
            self.transport.write(
                b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n"
                b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body
            )
            self.transport.close()
            return
        self.counted = True

    def connection_lost(self, exc: Exception | None) -> None:
        self.gate.leave(self)
        super().connection_lost(exc)

    def on_headers_complete(self) -> None:
        self.gate.busy(self)
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.cycle is None or self.cycle.response_complete:  # no pipelined request started
            self.gate.rest(self)

    def evict(self) -> None:
        """Closed to make room for a new connection (this one had no request in progress)."""
        self.gate.leave(self)
        self.transport.close()
