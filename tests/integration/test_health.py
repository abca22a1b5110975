"""/healthz against the real services: everything up, then Neo4j or Redis out of reach.

"Out of reach" is the real probes pointed at a port where nothing listens, so the running
services other tests use are left alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from shared.settings import Settings

pytestmark = pytest.mark.integration

NOTHING_LISTENS = "127.0.0.1:9"  # the discard port: refused at once


def test_every_service_and_queue_is_reported_up(api: TestClient) -> None:
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
    assert body["qdrant"]["status"] == "embedded"
    assert all(
        body["workers"]["queues"][queue] for queue in ("ingest", "embed", "write", "query", "reconcile")
    )


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
