"""A process of ours serving HTTP on 127.0.0.1 for the tests that need a real server (``engram
serve``, ``engram mcp --http``): started, awaited until it answers, stopped with SIGTERM; and a
raw socket's exchange with it (framing, read timeouts)."""

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
def engram_serving(args: list[str], port: int, log: Path, probe: str, **env: str) -> Iterator[str]:
    """Runs ``engram *args`` until the block ends; yields its base URL once ``probe`` answers."""
    # Another process on the port would answer the probe in its place (another checkout's app).
    with socket.socket() as taken:
        if taken.connect_ex(("127.0.0.1", port)) == 0:
            raise RuntimeError(
                f"127.0.0.1:{port} is taken by another process: move it with ENGRAM_TEST_PORTS"
            )
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [ENGRAM, *args], cwd=ROOT, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                httpx.get(base + probe, timeout=5)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"engram {args[0]} did not start:\n{log.read_text()[-3000:]}"
                    ) from None
                time.sleep(0.2)
        yield base
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def serving(settings: Settings, env: dict[str, str], log_name: str) -> Iterator[int]:
    """``engram serve`` on the test API port with ``env`` added; yields the port."""
    port = settings.api_port
    args = ["serve", "--host", "127.0.0.1", "--port", str(port)]
    with engram_serving(args, port, settings.data_dir / "logs" / log_name, "/healthz", **env):
        yield port


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
