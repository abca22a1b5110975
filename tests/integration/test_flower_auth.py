"""Flower as ops/supervise.py runs it (``python -m workers.flower``), on the test Redis.

Issue 25, finding 7: Flower's ``/metrics`` and ``/healthcheck`` answered without credentials
(workers, task names, counts), and 1,116 basic-auth guesses in 5 s never met a 429.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "flower-test-password"
BOUND = 5


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def flower(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = int(os.environ.get("ENGRAM_FLOWER_PORT") or _free_port())
    env = {
        **os.environ,
        "ENGRAM_FLOWER_PORT": str(port),
        "ENGRAM_FLOWER_ADDRESS": "127.0.0.1",
        "ENGRAM_FLOWER_PASSWORD": PASSWORD,
        "ENGRAM_AUTH_FAILURES_PER_ADDRESS": str(BOUND),
        "ENGRAM_AUTH_FAILURES_WINDOW_S": "60",
    }
    log = (tmp_path_factory.mktemp("flower") / "flower.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "workers.flower"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(url, timeout=2)
                break
            except httpx.TransportError:
                assert process.poll() is None, f"Flower ended; see {log.name}"
                time.sleep(0.3)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def test_flower_metrics_and_healthcheck_ask_for_credentials(flower: str) -> None:
    good = ("engram", PASSWORD)
    for path in ("/metrics", "/healthcheck"):
        assert httpx.get(f"{flower}{path}", timeout=10).status_code == 401
        answer = httpx.get(f"{flower}{path}", auth=good, timeout=10)
        assert answer.status_code == 200, answer.text
    assert b"flower_" in httpx.get(f"{flower}/metrics", auth=good, timeout=10).content


def test_repeated_wrong_passwords_meet_a_429(flower: str) -> None:
    # Given: a guesser trying passwords from one address
    codes = [
        httpx.get(f"{flower}/workers", auth=("engram", f"guess-{n}"), timeout=10).status_code
        for n in range(BOUND * 4)
    ]

    # Then: past the bound every further try is refused before any check, the right password too
    assert 429 in codes and codes.index(429) <= BOUND + 2, codes
    assert set(codes[codes.index(429) :]) == {429}
    assert httpx.get(f"{flower}/workers", auth=("engram", PASSWORD), timeout=10).status_code == 429
