"""The served app's doors (issue 25, findings 1 and 5, and two of 7), over real sockets on
loopback: nothing is read before a key (an unknown path or method is refused before its body, an
anonymous path takes a few KB, a signed body's read holds one of few slots), one client address
cannot hold every connection, a flood of half-open connections leaves ``/healthz`` answering,
which answers in milliseconds when idle, and ``/docs`` loads nothing from a CDN.

Other client addresses are other loopback addresses (127.0.0.2, ...: Linux routes 127/8 to lo).
"""

from __future__ import annotations

import contextlib
import socket
import statistics
import time
from collections.abc import Iterator

import httpx
import pytest

from shared.auth import signature
from shared.settings import Settings
from tests.integration.served import serving
from tests.integration.support import KeyMaker, Workers

pytestmark = pytest.mark.integration

CAP = 300
PER_CLIENT = 50
UNVERIFIED = 2
BIG = 61_000_000
MB = b" " * 1_000_000


@pytest.fixture(scope="module")
def served(settings: Settings, workers: Workers) -> Iterator[int]:
    env = {
        "ENGRAM_API_MAX_CONNECTIONS": str(CAP),
        "ENGRAM_API_MAX_CONNECTIONS_PER_CLIENT": str(PER_CLIENT),
        "ENGRAM_API_UNVERIFIED_READS": str(UNVERIFIED),
        "ENGRAM_API_BODY_TIMEOUT_S": "8",
    }
    with serving(settings, env, "test-api-doors.log") as port:
        yield port


def _connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))


def _send(connection: socket.socket, data: bytes) -> None:
    # The app may close it while we send: what it answered is still to be read.
    with contextlib.suppress(OSError):
        connection.sendall(data)


def _answer(connection: socket.socket, within_s: float) -> tuple[bytes, bool]:
    """What came within ``within_s``, and whether the app closed the connection."""
    deadline = time.monotonic() + within_s
    answer = b""
    while (left := deadline - time.monotonic()) > 0:
        connection.settimeout(left)
        try:
            chunk = connection.recv(65536)
        except TimeoutError:
            break
        except OSError:  # reset after the answer: closed
            return answer, True
        if not chunk:
            return answer, True
        answer += chunk
    return answer, False


def _head(method: str, path: str, length: int | None, *extra: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json", *extra]
    lines.append(f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _get(port: int, path: str, source: str, **headers: str) -> httpx.Response:
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(transport=transport, timeout=10) as client:
        return client.get(f"http://127.0.0.1:{port}{path}", headers=headers)


# Finding 1: nothing read before a key -----------------------------------------------------------


@pytest.mark.parametrize(("method", "path", "status"), [("POST", "/nowhere", 404), ("PUT", "/healthz", 405)])
def test_an_unknown_path_or_method_is_refused_before_its_body(
    served: int, method: str, path: str, status: int
) -> None:
    # Given no key and a 61 MB JSON body announced, of which 1 MB is sent
    with _connect(served) as connection:
        _send(connection, _head(method, path, BIG) + MB)
        # Then the refusal comes at once, and the connection is closed (the rest is never read)
        answer, closed = _answer(connection, 3.0)
    assert answer.startswith(f"HTTP/1.1 {status}".encode()), answer[:300]
    assert closed


def test_an_unknown_api_path_with_a_key_is_refused_before_its_body(
    served: int, keys: KeyMaker, tenant: str
) -> None:
    key = keys(tenant).key
    with _connect(served) as connection:
        _send(connection, _head("POST", "/api/nowhere", BIG, f"Authorization: Bearer {key}") + MB)
        answer, closed = _answer(connection, 3.0)
    assert answer.startswith(b"HTTP/1.1 404"), answer[:300]
    assert closed


@pytest.mark.parametrize(("method", "path"), [("POST", "/ui/signin"), ("GET", "/healthz")])
@pytest.mark.parametrize("declared", [True, False])
def test_an_anonymous_path_takes_a_few_kb_at_most(
    served: int, method: str, path: str, declared: bool
) -> None:
    # Given a 61 MB body, its length declared or sent chunked (no length to refuse it by)
    with _connect(served) as connection:
        if declared:
            _send(connection, _head(method, path, BIG) + MB)
        else:
            _send(connection, _head(method, path, None) + b"f4240\r\n" + MB + b"\r\n")
        # Then it is a 413 at once, and the connection closed
        answer, closed = _answer(connection, 3.0)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:300]
    assert b"ENGRAM_API_ANONYMOUS_BODY_BYTES" in answer
    assert closed


def test_a_sign_in_form_of_its_usual_size_is_still_read(served: int) -> None:
    response = httpx.post(
        f"http://127.0.0.1:{served}/ui/signin",
        data={"key": "egk_not_a_key"},
        headers={"Origin": f"http://127.0.0.1:{served}"},
        timeout=10,
    )
    assert response.status_code in (401, 403), response.text[:300]


def test_signed_bodies_whose_signature_is_unchecked_are_read_a_few_at_a_time(
    served: int, keys: KeyMaker, tenant: str
) -> None:
    # Given a real signing key id, a fresh timestamp and a wrong signature on 38 MB bodies
    made = keys(tenant, signing=True)
    assert made.signing_secret is not None
    now = str(int(time.time()))
    signed = (
        f"X-Engram-Key-Id: {made.info.id}",
        f"X-Engram-Timestamp: {now}",
        "X-Engram-Signature: v1=" + "0" * 64,
    )
    head = _head("POST", "/api/documents", 38_600_000, *signed)
    # When as many as the bound are being read (their bodies coming slowly)
    held = [_connect(served) for _ in range(UNVERIFIED)]
    try:
        for connection in held:
            _send(connection, head + MB)
        time.sleep(0.5)
        # Then one more is refused at once with a 503, its body unread
        with _connect(served) as connection:
            _send(connection, head + MB)
            answer, closed = _answer(connection, 3.0)
        assert answer.startswith(b"HTTP/1.1 503"), answer[:300]
        assert b"retry-after" in answer.lower()
        assert closed
    finally:
        for connection in held:
            connection.close()
    time.sleep(0.5)
    # And once they are gone, a rightly signed webhook is taken
    body = b'{"id": "signed-after", "text": "a signed webhook after the flood"}'
    now = str(int(time.time()))
    response = httpx.post(
        f"http://127.0.0.1:{served}/api/documents",
        content=body,
        headers={
            "content-type": "application/json",
            "x-engram-key-id": made.info.id,
            "x-engram-timestamp": now,
            "x-engram-signature": signature(made.signing_secret, now, body),
        },
        timeout=10,
    )
    assert response.status_code == 202, response.text


# Finding 5: connections -------------------------------------------------------------------------


def _half_open(port: int, count: int, source: str) -> list[socket.socket]:
    """``count`` connections from ``source`` that each send half a request's headers."""
    opened = []
    for _ in range(count):
        connection = _connect(port, source)
        _send(connection, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half: ")
        opened.append(connection)
    return opened


def _closed_by_the_app(connections: list[socket.socket]) -> int:
    closed = 0
    for connection in connections:
        connection.setblocking(False)
        try:
            closed += connection.recv(65536) == b"" or 1
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    return closed


def _timed_healthz(port: int, source: str) -> tuple[int, float]:
    started = time.monotonic()
    response = _get(port, "/healthz", source)
    return response.status_code, time.monotonic() - started


def test_one_client_address_cannot_hold_every_connection(served: int) -> None:
    # Given 1,010 half-open connections from one address
    flood = _half_open(served, 1010, "127.0.0.1")
    try:
        time.sleep(1.0)
        # When another client asks for /healthz, Then it is answered (behind the flood's accepts)
        status, took = _timed_healthz(served, "127.0.0.2")
        print(
            f"/healthz during 1,010 half-open connections from one address: {status} in {took * 1000:.0f} ms"
        )
        assert status == 200 and took < 5.0, (status, took)
        # And the app kept at most its bound of that address's connections
        assert _closed_by_the_app(flood) >= 1010 - PER_CLIENT
    finally:
        for connection in flood:
            connection.close()


def test_the_global_cap_keeps_healthz_and_requests_answering(
    served: int, keys: KeyMaker, tenant: str
) -> None:
    # Given half-open connections from eight addresses, each within its own bound, past the cap
    flood = [c for n in range(8) for c in _half_open(served, PER_CLIENT, f"127.0.1.{n + 1}")]
    try:
        time.sleep(1.0)
        # When other clients ask, Then /healthz and an API request are answered
        status, took = _timed_healthz(served, "127.0.0.3")
        print(
            f"/healthz during {len(flood)} half-open connections from 8 addresses: {status} in {took * 1000:.0f} ms"
        )
        assert status == 200 and took < 5.0, (status, took)
        response = _get(served, "/api/status", "127.0.0.4", Authorization=f"Bearer {keys(tenant).key}")
        assert response.status_code == 200, response.text
        # And the oldest idle connections made room: never more than the cap held
        assert _closed_by_the_app(flood) >= len(flood) - CAP
    finally:
        for connection in flood:
            connection.close()


# From finding 7: /healthz fast when idle; /docs without a CDN ------------------------------------


def test_an_idle_healthz_answers_within_50_ms(served: int) -> None:
    with httpx.Client(base_url=f"http://127.0.0.1:{served}", timeout=10) as client:
        assert client.get("/healthz").status_code == 200
        took = []
        for _ in range(10):
            started = time.monotonic()
            response = client.get("/healthz")
            took.append(time.monotonic() - started)
            assert response.status_code == 200, response.text
    print(f"idle /healthz: p50 {statistics.median(took) * 1000:.1f} ms, max {max(took) * 1000:.1f} ms")
    assert statistics.median(took) < 0.05, took


def test_no_page_of_the_app_loads_scripts_from_a_cdn(served: int) -> None:
    for page in ("/docs", "/redoc"):
        response = httpx.get(f"http://127.0.0.1:{served}{page}", timeout=10)
        assert response.status_code == 404 or "cdn." not in response.text, page
    assert httpx.get(f"http://127.0.0.1:{served}/openapi.json", timeout=10).status_code == 200
