"""HTTP framing of the served app (``engram serve``), over a raw socket: a request whose length
could be read two ways is refused and its connection closed (RFC 9112 §6.1), so a proxy in front
that frames by Content-Length cannot be made to smuggle a second request through."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from shared.settings import Settings
from tests.integration.served import exchange, serving
from tests.integration.support import Workers

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def served(settings: Settings, workers: Workers) -> Iterator[int]:
    with serving(settings, {"ENGRAM_API_KEEP_ALIVE_S": "2"}, "test-api-framing.log") as port:
        yield port


SMUGGLED = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


@pytest.mark.parametrize(
    "raw",
    [
        # both lengths: a proxy reading Content-Length forwards the smuggled request as body
        b"POST /api/documents HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 46\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + SMUGGLED,
        b"POST /api/documents HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 46\r\n"
        b"Transfer-Encoding: Chunked\r\n\r\n0\r\n\r\n" + SMUGGLED,
        b"POST /api/documents HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: identity\r\n"
        b"Content-Length: 2\r\n\r\n{}",
        # header lines ended by a bare LF
        b"GET /healthz HTTP/1.1\nHost: 127.0.0.1\n\n",
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\nX-Other: 1\r\n\r\n",
    ],
    ids=["cl-and-te", "cl-and-te-capitalised", "te-identity", "bare-lf", "bare-lf-in-a-header"],
)
def test_ambiguous_framing_is_refused_and_the_connection_closed(served: int, raw: bytes) -> None:
    answer, closed = exchange(served, raw)
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
    assert answer.count(b"HTTP/1.1") == 1  # nothing smuggled got an answer of its own
    assert closed


def test_a_plain_request_is_still_served_and_an_idle_connection_is_closed(served: int) -> None:
    started = time.monotonic()
    answer, closed = exchange(served, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", wait_s=10)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    # kept alive for ENGRAM_API_KEEP_ALIVE_S (2 s here), then closed by the app
    assert closed
    assert time.monotonic() - started < 8
