"""A real Qdrant server for the tests, started through ops/qdrant-server as an operator starts it.

ops/test names its address (``ENGRAM_TEST_QDRANT_URL``, a port of the test ports). When ops/test
runs the whole suite against the server (``ENGRAM_TEST_QDRANT=server``) it has started it and set
``ENGRAM_QDRANT_URL``: that server is used and left running. Otherwise the first test that asks
starts one in the test data folder and stops it when the session ends.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pydantic import SecretStr

from shared.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_URL = "http://127.0.0.1:6491"
START_TIMEOUT_S = 180


@dataclass(frozen=True)
class QdrantServer:
    url: str
    api_key: SecretStr

    def settings(self, prefix: str | None = None) -> Settings:
        """The test settings pointed at this server; collections under a prefix of their own."""
        return Settings(
            qdrant_url=self.url,
            qdrant_api_key=self.api_key,
            qdrant_collection_prefix=prefix or f"t{uuid.uuid4().hex[:12]}",
        )


def _ops(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ROOT / "ops" / "qdrant-server"), command],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
        check=False,
    )


@contextmanager
def running_server() -> Iterator[QdrantServer]:
    """The server ops/test started, or one started here and stopped on leaving."""
    given = os.environ.get("ENGRAM_QDRANT_URL")
    url = given or os.environ.get("ENGRAM_TEST_QDRANT_URL", DEFAULT_URL)
    env = {**os.environ, "ENGRAM_QDRANT_URL": url}
    started = False
    if not given and _ops("status", env).returncode != 0:
        done = _ops("start", env)
        if done.returncode != 0:
            raise RuntimeError(f"ops/qdrant-server start failed: {done.stdout}{done.stderr}")
        started = True
    key = _ops("key", env)
    if key.returncode != 0:
        raise RuntimeError(f"ops/qdrant-server key failed: {key.stderr}")
    try:
        yield QdrantServer(url, SecretStr(key.stdout.strip()))
    finally:
        if started:
            _ops("stop", env)
