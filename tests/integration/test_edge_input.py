"""What a hostile client's probes found, each refused at the edge with one error shape, against the
real app and stack: nothing enqueued, nothing stored, never a 500 (the security issue's findings
2-5)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from tests.integration.support import wait_until_finished

pytestmark = pytest.mark.integration

JSON = {"content-type": "application/json"}


def assert_problem(response: Any, status: int, *named: str) -> dict[str, Any]:
    """The one error body: ``detail`` a string, ``errors`` a list; the problem named in it."""
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert isinstance(body["detail"], str)
    assert isinstance(body["errors"], list)
    for name in named:
        assert name in response.text, (name, response.text)
    return body


def assert_unknown(api: TestClient, tenant: str, document_id: str) -> None:
    response = api.get(f"/api/documents/{document_id}", params={"user_id": tenant})
    assert_problem(response, 404)


def doc(tenant: str, **fields: Any) -> dict[str, Any]:
    return {"user_id": tenant, "id": "d", "text": "A perfectly fine sentence.", **fields}


# Bodies the JSON parser takes but the stores cannot.


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ('{{"user_id": "{t}", "id": "d", "text": "\\ud800 lone"}}', "surrogate"),
        ('{{"user_id": "{t}", "id": "d", "text": "fine", "importance": NaN}}', "NaN"),
        ('{{"user_id": "{t}", "id": "d", "text": "fine", "metadata": {{"x": Infinity}}}}', "Infinity"),
        ('{{"user_id": "mallory", "user_id": "{t}", "id": "d", "text": "fine"}}', "twice"),
    ],
)
def test_json_the_stores_cannot_take_is_refused_not_a_500(
    api: TestClient, tenant: str, raw: str, named: str
) -> None:
    response = api.post("/api/documents", content=raw.format(t=tenant).encode(), headers=JSON)
    assert_problem(response, 422, named)
    assert_unknown(api, tenant, "d")


def test_a_search_with_a_lone_surrogate_or_nan_is_refused(api: TestClient, redis_client: redis.Redis) -> None:
    for raw in ('{"query": "\\udc00", "user_id": "u"}', '{"query": "q", "user_id": "u", "threshold": NaN}'):
        assert_problem(api.post("/api/memory/semantic-search", content=raw.encode(), headers=JSON), 422)
    assert redis_client.llen("query") == 0


# Sizes.


def test_a_chunked_body_over_the_limit_is_refused_while_read(api: TestClient, settings: Any) -> None:
    sent = 0

    def body() -> Iterator[bytes]:
        nonlocal sent
        piece = b" " * 1_000_000
        while sent <= settings.max_request_bytes + len(piece):
            sent += len(piece)
            yield piece

    response = api.post("/api/documents", content=body(), headers=JSON)
    assert_problem(response, 413, "ENGRAM_MAX_REQUEST_BYTES")


def test_a_chunked_body_within_the_limit_is_taken(api: TestClient, tenant: str) -> None:
    payload = json.dumps(doc(tenant, id="chunked")).encode()
    response = api.post("/api/documents", content=iter([payload[:10], payload[10:]]), headers=JSON)
    assert response.status_code == 202, response.text
    wait_until_finished(api, tenant, ["chunked"])


def test_metadata_text_over_its_limit_is_refused(api: TestClient, tenant: str) -> None:
    response = api.post("/api/documents", json=doc(tenant, metadata={"blob": "x" * 30_000}))
    assert_problem(response, 422, "metadata")
    assert_unknown(api, tenant, "d")


# Values Neo4j would refuse at write time.


@pytest.mark.parametrize(
    "created_at",
    [
        "2024-01-01T00:00:00+18:30",
        "2024-01-01T00:00:00-23:59",
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:59:59-01:00",
    ],
)
def test_a_moment_neo4j_cannot_store_is_refused(api: TestClient, tenant: str, created_at: str) -> None:
    response = api.post("/api/documents", json=doc(tenant, created_at=created_at))
    assert_problem(response, 422, "created_at")
    assert_unknown(api, tenant, "d")


def test_out_of_range_date_filters_are_refused(api: TestClient, tenant: str) -> None:
    listed = api.get("/api/memories", params={"user_id": tenant, "from_date": "0001-01-01T00:00:00+01:00"})
    assert_problem(listed, 422, "from_date")
    searched = api.post(
        "/api/memory/semantic-search",
        json={"query": "q", "user_id": tenant, "filters": {"to_date": "2024-01-01T00:00:00+19:00"}},
    )
    assert_problem(searched, 422, "to_date")


@pytest.mark.parametrize("text", ["\u0301\u0302\u0303", "\ufffd\ufffd", "\u200b\u0301 \ufffd"])
def test_text_the_model_cannot_read_is_refused_at_the_edge(api: TestClient, tenant: str, text: str) -> None:
    response = api.post("/api/documents", json=doc(tenant, text=text))
    assert_problem(response, 422, "nothing to read")
    assert_unknown(api, tenant, "d")


# Queries the fulltext index cannot take as they are.


def test_a_query_of_1025_cjk_characters_is_answered(api: TestClient, tenant: str) -> None:
    response = api.post("/api/documents", json=doc(tenant, id="cjk", text="東京の天気は晴れです。"))
    assert response.status_code == 202
    wait_until_finished(api, tenant, ["cjk"])

    response = api.post("/api/memory/semantic-search", json={"query": "天" * 1025, "user_id": tenant})

    assert response.status_code == 200, response.text
    assert [r["document_id"] for r in response.json()["results"]] == ["cjk"]


# Identifiers: one form, on every path.


@pytest.mark.parametrize("variant", ["\u00a0{t}\n", " {t}", "{t}\u3000", "{t}\u200b"])
def test_a_look_alike_tenant_neither_reads_nor_writes_the_tenant(
    api: TestClient, tenant: str, variant: str
) -> None:
    response = api.post("/api/documents", json=doc(tenant, id="mine"))
    assert response.status_code == 202
    wait_until_finished(api, tenant, ["mine"])
    look_alike = variant.format(t=tenant)

    written = api.post("/api/documents", json=doc(look_alike, id="mine", text="Overwritten."))
    read = api.get("/api/documents/mine", params={"user_id": look_alike})
    listed = api.get("/api/memories", params={"user_id": look_alike})
    searched = api.post("/api/memory/semantic-search", json={"query": "fine", "user_id": look_alike})
    deleted = api.delete("/api/documents/mine", params={"user_id": look_alike})

    for response in (written, read, listed, searched, deleted):
        assert_problem(response, 422, "user_id")
    memories = api.get("/api/memories", params={"user_id": tenant}).json()["memories"]
    assert [m["content"] for m in memories] == ["A perfectly fine sentence."]


def test_a_document_id_in_the_path_is_checked_as_in_the_body(api: TestClient, tenant: str) -> None:
    for path_id in ("%20mine", "mine%C2%A0", "mine%E3%80%80"):
        response = api.get(f"/api/documents/{path_id}", params={"user_id": tenant})
        assert_problem(response, 422, "document_id")
        response = api.put(f"/api/documents/{path_id}", json={"user_id": tenant, "text": "Some text."})
        assert_problem(response, 422, "document_id")


def test_a_path_with_a_control_character_is_refused_not_read_without_it(api: TestClient, tenant: str) -> None:
    response = api.post("/api/documents", json=doc(tenant, id="mine"))
    assert response.status_code == 202
    wait_until_finished(api, tenant, ["mine"])

    # The router alone would read "mine\n" as "mine"
    for method in ("GET", "DELETE"):
        response = api.request(method, "/api/documents/mine%0A", params={"user_id": tenant})
        assert_problem(response, 400, "control character")
    assert api.get("/api/documents/mine", params={"user_id": tenant}).json()["state"] == "done"


# The error shape is documented.


def test_every_operation_documents_the_one_error_shape(api: TestClient) -> None:
    spec = api.get("/openapi.json").json()
    problem = {"$ref": "#/components/schemas/Problem"}
    for path, operations in spec["paths"].items():
        if path == "/healthz":  # its 503 carries the health report
            continue
        for method, operation in operations.items():
            for status in ("404", "413", "422", "503"):
                content = operation["responses"][status]["content"]["application/json"]
                assert content["schema"] == problem, (method, path, status)
