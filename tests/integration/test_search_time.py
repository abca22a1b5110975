"""A time named in a query, through the query queue: the memories made then come first."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.integration.support import wait_until_finished

pytestmark = pytest.mark.integration

TURNS = [
    ("t1", "Ana: I went hiking in the mountains with my sister.", "2022-08-14T10:00:00Z"),
    ("t2", "Ana: I went hiking along the coast with my sister.", "2023-05-20T18:30:00Z"),
    ("t3", "Ana: I went hiking in the forest with my sister.", "2023-09-02T09:15:00Z"),
]


def search(api: TestClient, **body: Any) -> dict[str, Any]:
    response = api.post("/api/memory/semantic-search", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def time_nudges(answer: dict[str, Any]) -> dict[str, float]:
    return {r["document_id"]: r["explanation"]["nudges"].get("time", 0.0) for r in answer["results"]}


def test_a_named_time_brings_the_turns_said_then_first(api: TestClient, tenant: str) -> None:
    documents = [
        {
            "user_id": tenant,
            "id": i,
            "text": t,
            "memory_type": "turn",
            "session_id": f"s-{i}",
            "created_at": at,
        }
        for i, t, at in TURNS
    ]
    response = api.post("/api/documents", json=documents)
    assert response.status_code == 202, response.text
    wait_until_finished(api, tenant, [i for i, _, _ in TURNS])  # type: ignore[misc]

    # When the question names a month, the turn said in it comes first, with its nudge explained
    may = search(api, query="Where did Ana go hiking in May 2023?", user_id=tenant, top_k=3)
    assert may["results"][0]["document_id"] == "t2"
    assert time_nudges(may) == {"t1": 0.0, "t2": 0.2, "t3": 0.0}

    # And "last year" is read from the tenant's newest memory (September 2023): 2022
    last_year = search(api, query="Where did Ana go hiking last year?", user_id=tenant, top_k=3)
    assert last_year["results"][0]["document_id"] == "t1"

    # Or from the now the caller gives: in 2024, last year is 2023
    given = search(
        api, query="Where did Ana go hiking last year?", user_id=tenant, top_k=3, now="2024-03-01T00:00:00Z"
    )
    assert time_nudges(given) == {"t1": 0.0, "t2": 0.2, "t3": 0.2}

    # And the baselines stay as they are
    assert set(
        time_nudges(search(api, query="hiking in May 2023", user_id=tenant, method="rrf")).values()
    ) == {0.0}


def test_a_now_that_is_no_moment_is_refused(api: TestClient, tenant: str) -> None:
    response = api.post(
        "/api/memory/semantic-search", json={"query": "last year", "user_id": tenant, "now": "someday"}
    )

    assert response.status_code == 422 and "now" in response.text
