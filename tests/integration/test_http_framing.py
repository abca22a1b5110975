"""HTTP framing of the served app (``engram serve``), over a raw socket: a request whose length
could be read two ways is refused and its connection closed (RFC 9112 §6.1), so a proxy in front
that frames by Content-Length cannot be made to smuggle a second request through."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from shared.settings import Settings
from tests.integration.support import ROOT, Workers

pytestmark = pytest.mark.integration

ENGRAM = str(Path(sys.executable).with_name("engram"))


@pytest.fixture(scope="module")
def served(settings: Settings, workers: Workers) -> Iterator[int]:
    log = settings.data_dir / "logs" / "test-api-framing.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [ENGRAM, "serve", "--host", "127.0.0.1", "--port", str(settings.api_port)],
            cwd=ROOT,
            env={**os.environ, "ENGRAM_API_KEEP_ALIVE_S": "2"},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{settings.api_port}/healthz", timeout=5)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the app did not start:\n{log.read_text()[-3000:]}") from None
                time.sleep(0.2)
        yield settings.api_port
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def exchange(port: int, raw: bytes, wait_s: float = 5.0) -> tuple[bytes, bool]:
    """What the app answers to ``raw``, and whether it then closed the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait_s) as connection:
        connection.sendall(raw)
        answer = b""
        try:
            while chunk := connection.recv(65536):
                answer += chunk
        except TimeoutError:
            return answer, False
        return answer, True


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
