"""/healthz against the real services: everything up, then Neo4j or Redis out of reach.

"Out of reach" is the real probes pointed at a port where nothing listens, so the running
services other tests use are left alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from shared.settings import Settings
from shared.stores.folders import embedded_folder
from tests.integration.support import ROOT, wait_until_finished

ENGRAM = str(Path(sys.executable).with_name("engram"))

pytestmark = [pytest.mark.integration, pytest.mark.backup]

NOTHING_LISTENS = "127.0.0.1:9"  # the discard port: refused at once


def test_every_service_and_queue_is_reported_up(api: TestClient, settings: Settings) -> None:
    # A check that overruns its 1 s bound counts as down, as it should; on a loaded machine the
    # first broadcast to the workers can, so the answer is awaited for a few tries.
    for _ in range(5):
        response = api.get("/healthz")
        if response.json()["status"] == "ok":
            break
        time.sleep(1)

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "ok", body
    assert body["qdrant"]["status"] == ("embedded" if settings.qdrant_url is None else "up")
    assert all(
        body["workers"]["queues"][queue] for queue in ("ingest", "embed", "write", "query", "reconcile")
    )


def test_the_backup_in_use_is_named_by_healthz_and_engram_status(
    api: TestClient, settings: Settings, tenant: str
) -> None:
    # Given a synced document (so a collection exists to count)
    document = {"user_id": tenant, "id": "named", "text": "Kelp forests grow in cold, clear seas."}
    assert api.post("/api/documents", json={"documents": [document]}).status_code == 202
    assert wait_until_finished(api, tenant, ["named"])["named"]["state"] == "done"

    # When an admin asks /healthz and a person runs engram status
    detail = api.get("/healthz").json()["qdrant"]["detail"]
    status = subprocess.run([ENGRAM, "status"], cwd=ROOT, capture_output=True, text=True, timeout=120)

    # Then both name the backup the stack runs on: the server's address, or the embedded folder
    assert status.returncode == 0, status.stderr
    stores = json.loads(status.stdout)["stores"]
    if settings.qdrant_url is None:
        folder = embedded_folder(settings)
        assert detail.startswith(f"folder {folder}")
        assert stores["qdrant"] == f"embedded {folder}"
    else:
        # A server is counted at the moment of asking (the embedded folder only by its owner)
        assert detail == f"server {settings.qdrant_url.rstrip('/')}"
        assert stores["qdrant"] == f"server {settings.qdrant_url}"
        assert stores["qdrant_points"] >= 1
        assert f"Qdrant (server {settings.qdrant_url}): {stores['qdrant_points']} points" in status.stderr


def test_neo4j_out_of_reach_is_reported_degraded(
    api: TestClient, settings: Settings, use_settings: Callable[[Settings], None]
) -> None:
    use_settings(settings.model_copy(update={"neo4j_uri": f"bolt://{NOTHING_LISTENS}"}))

    response = api.get("/healthz")

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "degraded"
    assert "neo4j" in body["down"]  # workers may show too on a loaded machine: not this test's concern
    assert "redis" not in body["down"]
    assert body["neo4j"]["status"] == "down"
    assert body["neo4j"]["ms"] < 1500


def test_redis_out_of_reach_is_503(
    api: TestClient, settings: Settings, use_settings: Callable[[Settings], None]
) -> None:
    use_settings(settings.model_copy(update={"redis_url": f"redis://{NOTHING_LISTENS}/0"}))

    response = api.get("/healthz")

    assert response.status_code == 503, response.text
    assert response.json()["status"] == "down"
    assert "redis" in response.json()["down"]
