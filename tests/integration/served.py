"""The app as ``engram serve`` runs it (uvicorn, httptools, its own process), for tests that
need a real socket: framing, read timeouts, the event loop kept free."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from shared.settings import Settings
from tests.integration.support import ROOT

ENGRAM = str(Path(sys.executable).with_name("engram"))


@contextmanager
def serving(settings: Settings, env: dict[str, str], log_name: str) -> Iterator[int]:
    """``engram serve`` on the test API port with ``env`` added; yields the port."""
    log = settings.data_dir / "logs" / log_name
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [ENGRAM, "serve", "--host", "127.0.0.1", "--port", str(settings.api_port)],
            cwd=ROOT,
            env={**os.environ, **env},
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
