"""Four facts of four projects, types, tags and dates, ingested through the HTTP app and the
workers, and a search timed through it: what the fallback's tests and the index rebuild's share."""

from __future__ import annotations

import time
from typing import Any

from fastapi.testclient import TestClient

from tests.integration.support import wait_until_finished

FACTS = [
    # id, text, project, memory type, tags, created_at
    (
        "photosynthesis",
        "Photosynthesis lets plants turn sunlight, water and carbon dioxide into sugar, releasing oxygen.",
        "botany",
        "fact",
        ["plants", "science"],
        "2024-06-01T12:00:00Z",
    ),
    (
        "sourdough",
        "A sourdough starter is a fermented mix of flour and water that keeps wild yeast alive.",
        "kitchen",
        "note",
        ["baking"],
        "2020-03-01T12:00:00Z",
    ),
    (
        "tides",
        "Tides rise and fall twice a day because the Moon's gravity pulls the oceans toward it.",
        "sea",
        "fact",
        ["science"],
        "2021-09-15T12:00:00Z",
    ),
    (
        "eiffel",
        "The Eiffel Tower was finished in 1889 for the World's Fair and stands in Paris.",
        "travel",
        "note",
        ["paris"],
        "2023-01-10T12:00:00Z",
    ),
]
LEAVES = "How do green leaves make food out of light?"


def ingest_facts(api: TestClient, tenant: str) -> None:
    documents = [
        {
            "user_id": tenant,
            "id": key,
            "text": text,
            "project_id": project,
            "memory_type": memory_type,
            "tags": tags,
            "created_at": created_at,
        }
        for key, text, project, memory_type, tags, created_at in FACTS
    ]
    response = api.post("/api/documents", json={"documents": documents})
    assert response.status_code == 202, response.text
    statuses = wait_until_finished(api, tenant, [key for key, *_ in FACTS])
    assert all(s["state"] == "done" and s["vector_sync"]["pending"] == 0 for s in statuses.values())


def timed_search(api: TestClient, **body: Any) -> tuple[int, dict[str, Any], float]:
    started = time.monotonic()
    response = api.post("/api/memory/semantic-search", json=body)
    return response.status_code, response.json(), time.monotonic() - started
