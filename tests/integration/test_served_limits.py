"""The served app (``engram serve``) under slow clients (issue 15, finding 5), over real sockets
on loopback, a few connections and seconds each: a client sending its headers slowly (a slowloris), or nothing at all, is closed after
  ``ENGRAM_API_HEADER_TIMEOUT_S``; a body sent slowly is refused (408, closed) after
  ``ENGRAM_API_BODY_TIMEOUT_S``; a client sending at a normal pace is untouched.
"""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from shared.settings import Settings
from tests.integration.served import serving
from tests.integration.support import KeyMaker, Workers

pytestmark = pytest.mark.integration

HEADER_S = 2.0
BODY_S = 4.0


@pytest.fixture(scope="module")
def served(settings: Settings, workers: Workers) -> Iterator[int]:
    env = {"ENGRAM_API_HEADER_TIMEOUT_S": str(HEADER_S), "ENGRAM_API_BODY_TIMEOUT_S": str(BODY_S)}
    with serving(settings, env, "test-api-limits.log") as port:
        yield port


def _drip(port: int, head: bytes, drip: bytes, every_s: float, for_s: float) -> tuple[bytes, float | None]:
    """Sends ``head``, then ``drip`` every ``every_s``; what the app answered, and how long after
    the connection was made it closed it (None: still open after ``for_s``)."""
    started = time.monotonic()
    answer = b""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
        if head:
            connection.sendall(head)
        while time.monotonic() - started < for_s:
            readable, _, _ = select.select([connection], [], [], every_s)
            try:
                if readable:
                    chunk = connection.recv(65536)
                    if not chunk:
                        return answer, time.monotonic() - started
                    answer += chunk
                elif drip:
                    connection.sendall(drip)
            except OSError:  # reset: the app closed it while we were sending
                return answer, time.monotonic() - started
    return answer, None


# Finding 5: slow clients ------------------------------------------------------------------------


def test_slowloris_connections_are_closed_after_the_header_timeout_and_others_are_served(
    served: int,
) -> None:
    # Given five clients sending a request's headers a byte every quarter second, never ending them
    head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
    with ThreadPoolExecutor(5) as pool:
        slow = [pool.submit(_drip, served, head, b"x", 0.25, 15.0) for _ in range(5)]
        time.sleep(0.5)
        # When another client asks meanwhile, Then it is served at once
        started = time.monotonic()
        assert httpx.get(f"http://127.0.0.1:{served}/healthz", timeout=10).status_code in (200, 503)
        assert time.monotonic() - started < HEADER_S
        results = [future.result() for future in slow]
    # And each slow one is closed about ENGRAM_API_HEADER_TIMEOUT_S after it began, with a 408
    for answer, closed_after in results:
        assert closed_after is not None, "a slowloris connection stayed open"
        assert HEADER_S * 0.9 <= closed_after <= HEADER_S + 3, closed_after
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert answer.count(b"HTTP/1.1") == 1


def test_a_connection_that_sends_nothing_is_closed_after_the_header_timeout(served: int) -> None:
    answer, closed_after = _drip(served, b"", b"", 0.25, 15.0)
    assert closed_after is not None and closed_after <= HEADER_S + 3, closed_after
    assert answer == b""


def test_a_body_sent_slowly_is_refused_after_the_body_timeout(
    served: int, keys: KeyMaker, tenant: str
) -> None:
    # Given a document's headers sent at once, then its body (of 100,000 bytes) a byte at a time
    head = (
        b"POST /api/documents HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        b"Authorization: Bearer " + keys(tenant).key.encode() + b"\r\ncontent-length: 100000\r\n\r\n"
        b'{"text": "'
    )
    answer, closed_after = _drip(served, head, b"a", 0.25, 20.0)
    # Then it is refused with a 408 and the connection closed, about the timeout after its start
    assert closed_after is not None, "a slow body's connection stayed open"
    assert BODY_S * 0.9 <= closed_after <= BODY_S + 4, closed_after
    assert answer.startswith(b"HTTP/1.1 408"), answer[:300]
    assert b"ENGRAM_API_BODY_TIMEOUT_S" in answer
    # And nothing was stored
    status = httpx.get(
        f"http://127.0.0.1:{served}/api/status", headers={"Authorization": f"Bearer {keys(tenant).key}"}
    )
    assert status.status_code == 200 and status.json()["documents"] == 0, status.text


def test_a_client_at_a_normal_pace_is_untouched(served: int, keys: KeyMaker, tenant: str) -> None:
    # Given a request whose headers and body each come in parts, well within the timeouts
    body = json.dumps({"id": "paced", "text": "sent in three parts, each half a second apart"}).encode()
    head = (
        b"POST /api/documents HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        b"Authorization: Bearer " + keys(tenant).key.encode() + b"\r\n"
    )
    parts = [head, b"content-length: " + str(len(body)).encode() + b"\r\n\r\n", body[:20], body[20:]]
    with socket.create_connection(("127.0.0.1", served), timeout=10) as connection:
        for part in parts:
            connection.sendall(part)
            time.sleep(0.5)
        answer = connection.recv(65536)
        # Then it is taken, and the connection stays open for the next request
        assert answer.startswith(b"HTTP/1.1 202"), answer[:300]
        connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert connection.recv(65536).startswith(b"HTTP/1.1 "), "the kept-alive connection was closed"
