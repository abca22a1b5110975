"""How much of a body a request may send, decided from its route and its caller before a byte of
it is read.

``BodyGuard`` read (and parsed) every request's body up to ``ENGRAM_MAX_REQUEST_BYTES`` whatever
its path, while the key is checked under ``/api`` only: a 61 MB JSON body to ``POST /nowhere``
or ``/ui/signin`` was read and parsed whole without a key. Now:

- **No route** for the method and path: nothing is read. The router's 404 or 405 answers, and the
  connection is closed when a body was announced (its rest is never read).
- **An anonymous request** (no key checked: ``/ui/signin``, ``/healthz``, the status page's forms,
  which carry a cookie checked by their route): ``ENGRAM_API_ANONYMOUS_BODY_BYTES`` (8 KB).
- **A caller a key vouches for**: the route's own limit, ``ENGRAM_MAX_REQUEST_BYTES``.

A body read before any key vouches for its sender — an anonymous one, or a signed webhook's,
whose signature can be checked only once it is all here — holds one of
``ENGRAM_API_UNVERIFIED_READS`` slots of the process while it is read (``UnverifiedReads``); with
none free the request is a 503 with ``Retry-After``, its body unread. So a real signing key id
with a wrong signature can keep that few bodies in flight, not as many as it opens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from starlette.routing import BaseRoute, Match
from starlette.types import Scope

from shared.settings import Settings, get_settings

__all__ = ["Allowance", "BodyPolicy", "UnverifiedReads", "body_announced", "routed", "unverified_reads"]


MAX_REQUEST_BYTES = "ENGRAM_MAX_REQUEST_BYTES"
ANONYMOUS_BODY_BYTES = "ENGRAM_API_ANONYMOUS_BODY_BYTES"


@dataclass(frozen=True)
class Allowance:
    """What a request's body may be: at most ``limit`` bytes (``setting`` names it in a 413);
    ``verified``: a key vouches for the sender, so its read holds no ``UnverifiedReads`` slot."""

    limit: int
    setting: str
    verified: bool


def routed(scope: Scope, routes: Sequence[BaseRoute]) -> bool:
    """Whether some route takes this method and path (a route of the path alone is a 405)."""
    return any(route.matches(scope)[0] is Match.FULL for route in routes)


def body_announced(scope: Scope) -> bool:
    """Whether the request says a body follows (a length above 0, or a transfer encoding)."""
    for name, value in scope["headers"]:
        if name.lower() == b"transfer-encoding":
            return True
        if name.lower() == b"content-length" and value.strip() not in (b"", b"0"):
            return True
    return False


class UnverifiedReads:
    """At most ``limit()`` bodies read at once whose sender no key vouches for yet. Used on the
    event loop only, so a count is enough."""

    def __init__(self, limit: Callable[[], int]) -> None:
        self.limit = limit
        self.reading = 0

    @contextmanager
    def slot(self) -> Iterator[bool]:
        """Yields whether a slot was free (and holds it until the block ends)."""
        if self.reading >= self.limit():
            yield False
            return
        self.reading += 1
        try:
            yield True
        finally:
            self.reading -= 1


@dataclass(frozen=True)
class BodyPolicy:
    """The app's rules for ``BodyGuard``: its ``routes`` (the app's own list, so routers included
    later count), ``verified`` (whether a key vouched for this request's caller) and ``reads``."""

    routes: Sequence[BaseRoute]
    settings: Callable[[], Settings]
    verified: Callable[[Scope], bool]
    reads: UnverifiedReads

    def allowance(self, scope: Scope) -> Allowance:
        settings = self.settings()
        if self.verified(scope):
            return Allowance(settings.max_request_bytes, MAX_REQUEST_BYTES, True)
        return Allowance(settings.api_anonymous_body_bytes, ANONYMOUS_BODY_BYTES, False)


# The app's one bound (per process: each process has its own event loop and memory).
unverified_reads = UnverifiedReads(lambda: get_settings().api_unverified_reads)
