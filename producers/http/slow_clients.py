"""Read timeouts of the served app: a client that sends its request slowly cannot hold a
connection (and a slot of ``ENGRAM_API_MAX_CONNECTIONS``) for long.

- **Headers**: ``TimedHttpToolsProtocol``, uvicorn's httptools protocol (``engram serve`` runs
  it), closes a connection whose request headers are not complete ``ENGRAM_API_HEADER_TIMEOUT_S``
  after the request's first byte, or after the connection was made when nothing came (uvicorn
  has a keep-alive timeout, but none for a request's headers: a client sending a header byte a
  second kept its connection for ever). It answers 408 first when part of a request came.
- **Body**: ``BodyDeadline``, an ASGI middleware, answers 408 and closes the connection when the
  body is not complete ``ENGRAM_API_BODY_TIMEOUT_S`` after the request reached the app (its
  headers were complete): a whole body, not a gap between two reads, so a body dripped a byte at
  a time is refused as surely as one never sent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from producers.http.wire import answer, problem_body
from shared.settings import get_settings

__all__ = ["BodyDeadline", "TimedHttpToolsProtocol"]


class TimedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline on each request's headers."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout_s = get_settings().api_header_timeout_s
        self._header_timer: asyncio.TimerHandle | None = None
        self._head_started = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()  # a connection that sends nothing is closed as a slow one

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_started = True
        if self._header_timer is None:
            self._arm_header_timer()

    def on_headers_complete(self) -> None:
        self._cancel_header_timer()
        self._head_started = False
        super().on_headers_complete()

    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_timed_out)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_timed_out(self) -> None:
        self._header_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            # An answer to the request before is being made: the connection ends after it.
            self.cycle.keep_alive = False
            return
        if self._head_started:
            self.logger.warning("Request headers not complete within %ss: closed.", self.header_timeout_s)
            body = problem_body(
                f"the request's headers did not arrive within {self.header_timeout_s:g} s "
                "(ENGRAM_API_HEADER_TIMEOUT_S)"
            )
            self.transport.write(
                b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body
            )
        self.transport.close()


class BodyTimedOut(Exception):
    pass


class BodyDeadline:
    """Answers 408 (and closes) when a request's body is not complete within ``timeout()``
    seconds of the request reaching the app; the body's messages pass through unchanged."""

    def __init__(self, app: ASGIApp, timeout: Callable[[], float]) -> None:
        self.app = app
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        timeout = self.timeout()
        deadline = time.monotonic() + timeout
        complete = False
        started = False

        async def timed_receive() -> Message:
            nonlocal complete
            if complete:  # after the body: a disconnect, awaited as long as it takes
                return await receive()
            try:
                with anyio.fail_after(max(deadline - time.monotonic(), 0.0)):
                    message = await receive()
            except TimeoutError:
                raise BodyTimedOut from None
            if message["type"] != "http.request" or not message.get("more_body", False):
                complete = True
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, timed_receive, watched_send)
        except BodyTimedOut:
            if started:
                raise
            detail = f"the request's body did not arrive within {timeout:g} s (ENGRAM_API_BODY_TIMEOUT_S)"
            await answer(send, 408, detail, extra=[(b"connection", b"close")])
