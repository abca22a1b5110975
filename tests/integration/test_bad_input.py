"""Bad input gets a clear 4xx naming the problem, and nothing is enqueued or written."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from shared.settings import Settings

pytestmark = pytest.mark.integration


def assert_nothing_enqueued(api: TestClient, tenant: str, document_ids: list[str]) -> None:
    for document_id in document_ids:
        status = api.get(f"/api/documents/{document_id}", params={"user_id": tenant})
        assert status.status_code == 404, status.text


def problem(response: Any) -> str:
    return str(response.json()["detail"])


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({}, "text"),
        ({"id": "d", "text": "fine"}, "user_id is required with an admin key"),
        ({"user_id": "{tenant}"}, "text"),
        ({"user_id": "{tenant}", "id": "d", "text": "   \n\t "}, "empty"),
        ({"user_id": "{tenant}", "id": "d", "text": 42}, "string"),
        ({"user_id": "{tenant}", "id": "d", "text": "fine", "colour": "red"}, "colour"),
        ({"user_id": "{tenant}", "id": "d", "text": "fine", "importance": 7}, "importance"),
        ({"user_id": "bad\u0000id", "id": "d", "text": "fine"}, "user_id"),
        ({"documents": []}, "documents"),
    ],
)
def test_malformed_documents_are_refused_with_the_field_named(
    api: TestClient, tenant: str, body: dict[str, Any], expected: str
) -> None:
    filled = {k: (v.replace("{tenant}", tenant) if isinstance(v, str) else v) for k, v in body.items()}
    response = api.post("/api/documents", json=filled)
    assert response.status_code == 422
    assert expected in response.text
    assert_nothing_enqueued(api, tenant, ["d"])


def test_a_batch_with_one_bad_document_enqueues_none_of_it(api: TestClient, tenant: str) -> None:
    response = api.post(
        "/api/documents",
        json={
            "documents": [
                {"user_id": tenant, "id": "good", "text": "fine"},
                {"user_id": tenant, "id": "bad", "text": ""},
            ]
        },
    )
    assert response.status_code == 422
    assert_nothing_enqueued(api, tenant, ["good", "bad"])


def test_not_json_and_not_utf8_bodies_are_refused(api: TestClient, tenant: str) -> None:
    garbage = api.post("/api/documents", content=b"{not json", headers={"content-type": "application/json"})
    assert garbage.status_code == 422

    latin1 = f'{{"user_id": "{tenant}", "id": "d", "text": "caf\xe9"}}'.encode("latin-1")
    not_utf8 = api.post("/api/documents", content=latin1, headers={"content-type": "application/json"})
    assert not_utf8.status_code in (400, 422)
    assert_nothing_enqueued(api, tenant, ["d"])


def test_a_document_over_the_size_limit_is_refused_with_413(
    api: TestClient, settings: Settings, tenant: str
) -> None:
    text = "x" * (settings.max_document_bytes + 1)
    response = api.post("/api/documents", json={"user_id": tenant, "id": "huge", "text": text})
    assert response.status_code == 413
    assert "ENGRAM_MAX_DOCUMENT_BYTES" in problem(response)
    assert_nothing_enqueued(api, tenant, ["huge"])


def test_the_same_document_twice_in_one_request_is_refused(api: TestClient, tenant: str) -> None:
    doc = {"user_id": tenant, "id": "twice", "text": "once is enough"}
    response = api.post("/api/documents", json=[doc, doc])
    assert response.status_code == 409  # two versions of one document at once: a conflict
    assert "twice" in problem(response)
    assert_nothing_enqueued(api, tenant, ["twice"])


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"query": "where is it"}, "user_id"),
        ({"query": "  ", "user_id": "u"}, "empty"),
        ({"query": "where", "user_id": "u", "top_k": 0}, "top_k"),
        ({"query": "where", "user_id": "u", "threshold": 2}, "threshold"),
        ({"query": "where", "user_id": "u", "filters": {"colour": "red"}}, "colour"),
        ({"query": "where", "user_id": "u", "filters": {"from_date": "yesterday"}}, "from_date"),
    ],
)
def test_bad_searches_are_refused_before_reaching_the_queue(
    api: TestClient, redis_client: redis.Redis, body: dict[str, Any], expected: str
) -> None:
    response = api.post("/api/memory/semantic-search", json=body)
    assert response.status_code == 422
    assert expected in response.text
    assert redis_client.llen("query") == 0


def test_status_of_an_unknown_document_is_404_and_needs_a_tenant(api: TestClient, tenant: str) -> None:
    assert api.get("/api/documents/nope", params={"user_id": tenant}).status_code == 404
    assert api.get("/api/documents/nope").status_code == 422
