"""The HTTP app's door: the Host allow-list, and who the caller is, before any body is read.

``AuthGuard`` is the outermost ASGI middleware. Every request must name an allowed host
(``ENGRAM_ALLOWED_HOSTS``: a DNS-rebinding page naming its own host is refused, 400). Every
``/api`` request must then carry an API key — ``Authorization: Bearer <key>`` or
``X-API-Key: <key>`` (n8n's Header Auth) — or be a signed webhook (``X-Engram-Key-Id``,
``X-Engram-Timestamp``, ``X-Engram-Signature``, on ``POST /api/documents`` only: once the key id
and timestamp hold, the body is read, bounded, to check it, holding one of
``ENGRAM_API_UNVERIFIED_READS`` slots: ``producers.http.body_policy``). An
anonymous request is answered 401 without its body being read. Failed keys and signatures are
counted per address and key id (``shared/failed_tries.py``): past the bound, 429 before any key
is looked up.
The caller is put in the ASGI scope for the routes (``caller``). ``/metrics`` is checked as
``/api`` is (its route wants an admin key). ``/healthz`` and the OpenAPI pages are open.

With ``ENGRAM_AUTH_MODE=local`` there are no keys: every request acts as an admin, and only
loopback clients are served (settings refuse a non-loopback ``ENGRAM_API_HOST`` in that mode).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache, partial

import anyio.to_thread
from starlette.types import ASGIApp, Receive, Scope, Send

from producers.http.body_policy import UnverifiedReads, unverified_reads
from producers.http.wire import BodyTooLarge, answer, read_body, replay, too_many_unverified
from shared.auth import LOCAL_CALLER, Authenticator, Caller
from shared.errors import ServiceUnavailable, TooManyFailures, Unauthenticated
from shared.failed_tries import FailedTries, key_id_of, signing_key_id_of
from shared.redis_client import connect
from shared.settings import Settings, get_settings, is_loopback

CALLER = "engram.caller"
# Headers that name the caller or its signature: each may appear once in a request.
ONE_EACH = ("authorization", "x-api-key", "x-engram-key-id", "x-engram-timestamp", "x-engram-signature")


class Ambiguous(Exception):
    """The request names its caller in two ways: a 400, never a guess."""


CHALLENGE = [(b"www-authenticate", b'Bearer realm="engram"')]


# A Host header is one host and at most a port (RFC 9110 §7.2, RFC 3986's host): a DNS name or
# IPv4 address, or an IPv6 address in brackets. Anything else (a list, userinfo, a path, a
# second colon) is no host this app serves, whatever the allow-list says.
_HOST = re.compile(r"(\[[0-9a-f:.]+\]|[a-z0-9_](?:[a-z0-9_.-]*[a-z0-9_])?)(?::([0-9]{1,5}))?")


def host_of(header: str) -> str | None:
    """The host of a Host header, without its port (``[::1]:8000`` is ``[::1]``); None when the
    header is not one host and an optional port."""
    match = _HOST.fullmatch(header.lower())
    if match is None or (match.group(2) is not None and int(match.group(2)) > 65535):
        return None
    return match.group(1)


def headers_of(scope: Scope) -> dict[str, str]:
    """A request's headers by lower-case name (of a repeated one, the last)."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def repeated_in(scope: Scope, once: Iterable[str]) -> list[str]:
    """Those of the headers ``once`` that the request carries more than once: a proxy may read the
    first and the app the last."""
    named = Counter(k.decode("latin-1").lower() for k, _ in scope["headers"])
    return sorted(name for name in once if named[name] > 1)


def host_allowed(header: str, allowed: list[str]) -> bool:
    host = host_of(header)
    if host is None:
        return False
    for pattern in allowed:
        pattern = pattern.lower()
        if pattern == "*" or host == pattern:
            return True
        if pattern.startswith("*.") and host.endswith(pattern[1:]):
            return True
    return False


@lru_cache(maxsize=1)
def failed_tries() -> FailedTries:
    """The app's counts of failed key checks (Redis, so every app process agrees)."""
    s = get_settings()
    return FailedTries(
        connect(s), s.auth_failures_per_address, s.auth_failures_per_key, s.auth_failures_window_s
    )


def address_of(scope: Scope) -> str | None:
    client = scope.get("client")
    return str(client[0]) if client else None


def caller_of(scope: Scope) -> Caller:
    """The caller ``AuthGuard`` found for this request."""
    found = scope.get(CALLER)
    if not isinstance(found, Caller):
        raise Unauthenticated("an API key is required")
    return found


class AuthGuard:
    def __init__(
        self,
        app: ASGIApp,
        settings: Callable[[], Settings],
        authenticator: Callable[[], Authenticator],
        reads: UnverifiedReads = unverified_reads,
        tries: Callable[[], FailedTries] = failed_tries,
    ) -> None:
        self.app = app
        self.settings = settings
        self.authenticator = authenticator
        self.reads = reads
        self.tries = tries

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        settings = self.settings()
        headers = headers_of(scope)
        repeated = repeated_in(scope, ONE_EACH)
        if repeated or repeated_in(scope, ("host",)):
            # Two of them: a proxy may read the first and the app the last (alice, then bob).
            twice = ", ".join(repeated) or "host"
            await answer(send, 400, f"a header that must appear once appears twice: {twice}")
            return
        if not host_allowed(headers.get("host", ""), settings.allowed_hosts):
            await answer(
                send, 400, "the Host header names a host this app does not serve (ENGRAM_ALLOWED_HOSTS)"
            )
            return
        path: str = scope["path"]
        if not (path == "/api" or path.startswith("/api/") or path == "/metrics"):
            await self.app(scope, receive, send)
            return
        if settings.auth_mode == "local":
            client = scope.get("client")
            if client is None or not is_loopback(str(client[0])):
                await answer(send, 403, "ENGRAM_AUTH_MODE=local answers loopback clients only")
                return
            scope[CALLER] = LOCAL_CALLER
            await self.app(scope, receive, send)
            return
        try:
            if "x-engram-signature" in headers:
                if (scope["method"], path) != ("POST", "/api/documents"):
                    # The signature covers the body, not the method or path: it is good for the
                    # one operation a webhook performs.
                    raise Unauthenticated("a signed request is taken by POST /api/documents only")
                # The key named, and that it signs, before a byte of the body is read. Failures
                # are counted per address and key id as a Bearer guess's are.
                key_id = headers.get("x-engram-key-id", "")
                timestamp = headers.get("x-engram-timestamp", "")
                counted = partial(self.tries().check, address_of(scope), signing_key_id_of(key_id))
                await anyio.to_thread.run_sync(
                    counted, partial(self.authenticator().signing_key, key_id, timestamp)
                )
                # Read before its signature can vouch for it: one of a few such reads at once.
                with self.reads.slot() as free:
                    if not free:
                        await too_many_unverified(send)
                        return
                    body = await read_body(receive, settings.max_request_bytes)
                if body is None:
                    return
                receive = replay(body, receive)
                signed = partial(
                    self.authenticator().signed, key_id, timestamp, headers["x-engram-signature"], body
                )
                scope[CALLER] = await anyio.to_thread.run_sync(counted, signed)
            else:
                token = api_key_of(headers)
                bearer = partial(self.authenticator().bearer, token)
                scope[CALLER] = await anyio.to_thread.run_sync(
                    self.tries().check, address_of(scope), key_id_of(token), bearer
                )
        except TooManyFailures as exc:
            await answer(send, 429, str(exc), extra=[(b"retry-after", str(exc.retry_after_s).encode())])
            return
        except Ambiguous as exc:
            await answer(send, 400, str(exc))
            return
        except Unauthenticated as exc:
            await answer(send, 401, str(exc), extra=CHALLENGE)
            return
        except BodyTooLarge as exc:
            await answer(send, 413, str(exc))
            return
        except ServiceUnavailable as exc:
            await answer(send, 503, f"API keys cannot be checked: {exc}", service=exc.service)
            return
        await self.app(scope, receive, send)


def api_key_of(headers: Mapping[str, str]) -> str:
    """The API key a request carries, read one way wherever a key is read (this guard, ``/healthz``
    deciding whether to show details, MCP over HTTP): ``Authorization: Bearer <key>`` (the scheme
    in any case) or ``X-API-Key: <key>``; both at once is ``Ambiguous`` (a 400, never a guess at
    which one a proxy read), neither is ``Unauthenticated``. ``headers``: lower-case names."""
    if "authorization" in headers and "x-api-key" in headers:
        raise Ambiguous("both Authorization and X-API-Key are given: send the key once")
    authorization = headers.get("authorization", "")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token:
        return token
    if "x-api-key" in headers:
        return headers["x-api-key"]
    raise Unauthenticated(
        "an API key is required: Authorization: Bearer <key>, or X-API-Key: <key> (engram keys create)"
    )
