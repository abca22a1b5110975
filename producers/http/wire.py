"""The HTTP app's edge: what every request body passes before a route sees it, and the one error
body every 4xx and 5xx carries.

``BodyGuard`` is a pure ASGI middleware. It reads the body itself, counting bytes whatever the
transfer encoding (a chunked body declares no length), and answers 413 the moment it passes
``ENGRAM_MAX_REQUEST_BYTES`` (less for an anonymous caller, nothing for a path no route takes:
``producers.http.body_policy``); a URL path holding a control character is refused (400). A JSON body
is then parsed once strictly — duplicate keys, ``NaN`` and ``Infinity``, unpaired surrogates and
bytes that are not UTF-8 are refused with a 422 naming the problem — and handed on to the app
unchanged. So no route, validator or error handler ever holds input that cannot be stored or
echoed back. ``one_value_each``, a dependency of every route, refuses a query parameter of one
value given twice.
"""

from __future__ import annotations

import json
import math
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from producers.http.body_policy import MAX_REQUEST_BYTES, Allowance, BodyPolicy, body_announced, routed
from producers.http.threads import INLINE_BYTES, off_the_loop
from shared.api_models import Problem, ProblemItem


def problem_body(detail: str, errors: list[ProblemItem] | None = None, service: str | None = None) -> bytes:
    problem = Problem(detail=detail, errors=errors or [], service=service)
    return problem.model_dump_json(exclude_none=True).encode()


class StrictJsonError(ValueError):
    pass


# Keys one object of a request body may hold: a document has 17 fields and 64 metadata keys at
# most, and each key past a model's fields would cost an error of its own (a million of them, a
# minute of work for a 12 MB body), so a body's objects are bounded before anything validates them.
MAX_KEYS = 128


def _bounded_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len(pairs) > MAX_KEYS:
        raise StrictJsonError(f"an object holds {len(pairs)} keys; the limit is {MAX_KEYS}")
    return _pairs(pairs)


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise StrictJsonError(f"the key {key!r} appears twice in one object")
        seen[key] = value
    return seen


def _finite(text: str) -> float:
    """A JSON number read as a double: ``1e400`` is no number a double holds (it would be
    Infinity, which JSON cannot say), so it is refused as NaN and Infinity are."""
    number = float(text)
    if not math.isfinite(number):
        raise StrictJsonError(f"{text[:40]} is too large for a number (a double)")
    return number


def _no_constant(name: str) -> Any:
    raise StrictJsonError(f"{name} is not a JSON number")


def _check_strings(value: Any) -> None:
    """Refuses a string with an unpaired surrogate ("\\ud800" is valid JSON, not valid text)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise StrictJsonError("a string holds an unpaired surrogate: not Unicode text") from exc
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def loads_strict(text: str, what: str = "the body", bounded: bool = False) -> Any:
    """``text`` parsed as JSON, or ``StrictJsonError`` naming what makes it unacceptable;
    ``bounded``: no object of more than ``MAX_KEYS`` keys (a request body's rule)."""
    hook = _bounded_pairs if bounded else _pairs
    try:
        parsed = json.loads(text, object_pairs_hook=hook, parse_constant=_no_constant, parse_float=_finite)
    except StrictJsonError:
        raise
    except (ValueError, RecursionError) as exc:
        raise StrictJsonError(f"{what} is not JSON: {exc}") from exc
    _check_strings(parsed)
    return parsed


def check_json(body: bytes) -> Any:
    """``body`` parsed, or ``StrictJsonError`` naming what makes it unacceptable JSON."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StrictJsonError(f"the body is not UTF-8 (byte {exc.start})") from exc
    return loads_strict(text, bounded=True)


# Where BodyGuard leaves a JSON body it parsed, with the body: (body, value), for the route.
PARSED_JSON = "engram.parsed_json"


async def one_value_each(request: Request) -> None:
    """Refuses a query parameter of one value given twice (``?user_id=b&user_id=a``): the app
    would read the last, a proxy or log may read the first, and the two must never disagree on
    whose data is asked for. Parameters that are lists (``tag``, ``memory_type``) may repeat."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    repeatable = {
        field.alias for field in route.dependant.query_params if _is_list(field.field_info.annotation)
    }
    seen: set[str] = set()
    for key, _ in request.query_params.multi_items():
        if key in seen and key not in repeatable:
            msg = "given more than once; it takes one value"
            raise RequestValidationError([{"loc": ("query", key), "msg": msg, "type": "duplicate"}])
        seen.add(key)


def _is_list(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _is_list(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return any(_is_list(argument) for argument in typing.get_args(annotation))
    return isinstance(origin, type) and issubclass(origin, Sequence) and not issubclass(origin, str)


class BodyGuard:
    """Bounds every body by bytes received and checks JSON bodies strictly (see the module)."""

    def __init__(self, app: ASGIApp, limit: Callable[[], int], policy: BodyPolicy | None = None) -> None:
        self.app = app
        self.limit = limit
        self.policy = policy  # None: every body may be read up to ``limit``, by anyone

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if any(ord(character) < 0x20 or ord(character) == 0x7F for character in scope["path"]):
            # Routing would read "/api/documents/mine\n" as document "mine" (a regex's "$" matches
            # before a final newline): no id holds a control character, so no path may.
            await answer(send, 400, "the URL path holds a control character")
            return
        policy = self.policy
        if policy is not None and not routed(scope, policy.routes):
            # No route takes it: the router's 404 or 405, and not a byte of a body read.
            await self.app(scope, replay(b"", receive), _closing(send) if body_announced(scope) else send)
            return
        allowed = policy.allowance(scope) if policy else Allowance(self.limit(), MAX_REQUEST_BYTES, True)
        limit = allowed.limit
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        declared = headers.get("content-length", "")
        if declared.isascii() and declared.isdigit() and int(declared) > limit:
            await answer(
                send, 413, f"request body is {declared} bytes; {_limit_text(limit, allowed.setting)}"
            )
            return
        try:
            if allowed.verified or policy is None or not body_announced(scope):
                body = await read_body(receive, limit, allowed.setting)
            else:
                with policy.reads.slot() as free:
                    if not free:
                        await too_many_unverified(send)
                        return
                    body = await read_body(receive, limit, allowed.setting)
        except BodyTooLarge as exc:
            await answer(send, 413, str(exc))
            return
        if body is None:
            return
        if body and "json" in headers.get("content-type", ""):
            try:
                # A large body is parsed on a worker thread: the event loop keeps serving.
                inline = len(body) <= INLINE_BYTES
                parsed = check_json(body) if inline else await off_the_loop(check_json, body)
            except StrictJsonError as exc:
                await answer(send, 422, str(exc), [ProblemItem(loc=["body"], msg=str(exc), type="json")])
                return
            scope[PARSED_JSON] = (body, parsed)
        await self.app(scope, replay(body, receive), send)


class BodyTooLarge(Exception):
    pass


async def read_body(receive: Receive, limit: int, setting: str = MAX_REQUEST_BYTES) -> bytes | None:
    """The whole body, counted as it is received (raises ``BodyTooLarge`` past ``limit``, the
    value of ``setting``); None when the client went away first."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        body += message.get("body", b"")
        if len(body) > limit:
            raise BodyTooLarge(f"request body passed {limit} bytes; {_limit_text(limit, setting)}")
        if not message.get("more_body", False):
            return bytes(body)


def _limit_text(limit: int, setting: str) -> str:
    return f"the limit is {limit} ({setting})"


async def too_many_unverified(send: Send) -> None:
    """503 to a body that would be read before any key vouches for its sender, when
    ``ENGRAM_API_UNVERIFIED_READS`` such bodies are being read (``producers.http.body_policy``)."""
    detail = "too many bodies of unverified senders are being read (ENGRAM_API_UNVERIFIED_READS); retry"
    await answer(send, 503, detail, extra=[(b"retry-after", b"1"), (b"connection", b"close")], service="api")


def _closing(send: Send) -> Send:
    """A ``send`` whose answer closes the connection (a body announced and left unread)."""

    async def closing(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"connection"]
            message = {**message, "headers": [*headers, (b"connection", b"close")]}
        await send(message)

    return closing


def replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the app a body already read, then the real messages."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # after the body: the disconnect, when it comes

    return replayed


async def answer(
    send: Send,
    status: int,
    detail: str,
    errors: list[ProblemItem] | None = None,
    extra: list[tuple[bytes, bytes]] | None = None,
    service: str | None = None,
) -> None:
    """An error answer in the one shape, sent from a middleware (before any route)."""
    body = problem_body(detail, errors, service)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += extra or []
    if status in (401, 413):  # the rest of the body is not read: the connection cannot be reused
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
