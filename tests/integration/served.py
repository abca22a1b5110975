"""A process of ours serving HTTP on 127.0.0.1 for the tests that need a real server (``engram
serve``, ``engram mcp --http``): started, awaited until it answers, stopped with SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.integration.support import ROOT

ENGRAM = str(Path(sys.executable).with_name("engram"))


@contextmanager
def engram_serving(args: list[str], port: int, log: Path, probe: str, **env: str) -> Iterator[str]:
    """Runs ``engram *args`` until the block ends; yields its base URL once ``probe`` answers."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [ENGRAM, *args], cwd=ROOT, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
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
