"""Redis at its maxmemory (noeviction refuses every write): producers answer a clear 503 / exit 3
naming Redis's memory, not a 500 or a traceback; once memory is back the same call is accepted."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import pytest
import redis
from fastapi.testclient import TestClient

from tests.integration.support import ROOT, Workers, wait_until_finished

pytestmark = pytest.mark.integration
ENGRAM = str(Path(sys.executable).with_name("engram"))


@contextmanager
def redis_full(client: redis.Redis) -> Iterator[None]:
    """Redis refuses writes as at its maxmemory: a limit of 1 byte, nothing evicted."""
    config = cast(dict[str, str], client.config_get("maxmemory*"))
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", 1)
    try:
        yield
    finally:
        client.config_set("maxmemory", config["maxmemory"])
        client.config_set("maxmemory-policy", config["maxmemory-policy"])


@pytest.fixture(autouse=True)
def supervised(workers: Workers) -> Iterator[None]:
    """A worker whose acknowledgement Redis refused has exited; it is started again, as
    supervisord does in a deployment, so the tests after these find every queue served."""
    yield
    workers.revive()


def test_http_ingest_into_a_full_redis_is_a_503_naming_its_memory(
    api: TestClient, redis_client: redis.Redis, tenant: str
) -> None:
    document = {"user_id": tenant, "id": "full-1", "text": "Redis is full today."}

    # When a document is sent while Redis is at its maxmemory
    with redis_full(redis_client):
        refused = api.post("/api/documents", json=document)

    # Then the producer is told to come back later, and why
    assert refused.status_code == 503, refused.text
    assert refused.json()["service"] == "redis"
    assert "out of memory (maxmemory reached)" in refused.json()["detail"]

    # And once memory is back the same document is accepted, and stored
    assert api.post("/api/documents", json=document).status_code == 202
    assert wait_until_finished(api, tenant, ["full-1"])["full-1"]["state"] == "done"


def test_cli_ingest_into_a_full_redis_exits_3_naming_its_memory(
    workers: Workers, redis_client: redis.Redis, tmp_path: Path, tenant: str
) -> None:
    (tmp_path / "note.txt").write_text("Redis is full today.")
    command = [ENGRAM, "ingest", str(tmp_path), "--user", tenant, "--no-wait"]

    with redis_full(redis_client):
        refused = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)

    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert "redis is unavailable" in refused.stderr and "out of memory (maxmemory reached)" in refused.stderr
    assert "Traceback" not in refused.stderr
