"""The HTTP edge: every body bounded by bytes received, JSON taken only when it is strict."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

import pytest
from fastapi import Depends, FastAPI, Query
from fastapi.testclient import TestClient
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from producers.http.wire import BodyGuard, StrictJsonError, check_json, one_value_each

LIMIT = 1000


async def echo(request: Request) -> JSONResponse:
    body = await request.body()
    return JSONResponse({"bytes": len(body), "body": body.decode("utf-8", "replace")})


@pytest.fixture
def client() -> Iterator[TestClient]:
    app = Starlette(routes=[Route("/echo", echo, methods=["POST"])])
    with TestClient(BodyGuard(app, limit=lambda: LIMIT)) as test_client:
        yield test_client


def chunks(total: int, size: int = 100) -> Iterator[bytes]:
    """A body sent chunked: no Content-Length declares it."""
    for start in range(0, total, size):
        yield b"x" * min(size, total - start)


def test_a_body_within_the_limit_reaches_the_app_unchanged(client: TestClient) -> None:
    body = '{"text": "caf\u00e9 \u6771\u4eac", "n": [1, 2.5, null]}'.encode()
    response = client.post("/echo", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 200
    assert response.json() == {"bytes": len(body), "body": body.decode()}


def test_a_chunked_body_over_the_limit_is_refused_while_it_is_read(client: TestClient) -> None:
    response = client.post("/echo", content=chunks(LIMIT * 50))
    assert response.status_code == 413
    assert "ENGRAM_MAX_REQUEST_BYTES" in response.json()["detail"]


def test_a_chunked_body_within_the_limit_is_taken(client: TestClient) -> None:
    response = client.post("/echo", content=chunks(LIMIT))
    assert response.status_code == 200
    assert response.json()["bytes"] == LIMIT


def test_a_declared_length_over_the_limit_is_refused_before_reading(client: TestClient) -> None:
    response = client.post("/echo", content=b"x" * (LIMIT + 1))
    assert response.status_code == 413
    assert response.headers["connection"] == "close"


@pytest.mark.parametrize(
    ("body", "named"),
    [
        (b'{"user_id": "alice", "user_id": "mallory"}', "appears twice"),
        (b'{"importance": NaN}', "NaN"),
        (b'{"importance": Infinity}', "Infinity"),
        (b'{"importance": -Infinity}', "Infinity"),
        (b'{"text": "\\ud800"}', "surrogate"),
        (b'{"text": ["ok", {"deep": "\\udfff"}]}', "surrogate"),
        (b'{"\\ud800": 1}', "surrogate"),
        ('{"text": "caf\u00e9"}'.encode("latin-1"), "not UTF-8"),
        (b"{not json", "not JSON"),
        (b"[" * 990, "not JSON"),
    ],
)
def test_json_that_is_not_strict_is_refused_with_one_problem_shape(
    client: TestClient, body: bytes, named: str
) -> None:
    response = client.post("/echo", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422
    problem = response.json()
    assert named in problem["detail"]
    assert problem["errors"] == [{"loc": ["body"], "msg": problem["detail"], "type": "json"}]


def test_a_surrogate_pair_is_text_and_is_taken() -> None:
    check_json(b'{"text": "\\ud83d\\ude00"}')  # U+1F600, written as its UTF-16 pair


def test_check_json_names_the_duplicate_key() -> None:
    with pytest.raises(StrictJsonError, match="'id'"):
        check_json(b'[{"id": 1}, {"id": 2, "id": 3}]')


@pytest.mark.parametrize("path", ["/echo%0A", "/echo%00", "/ec%0Dho", "/echo%7F"])
def test_a_path_with_a_control_character_is_refused(client: TestClient, path: str) -> None:
    response = client.post(path, content=b"{}")
    assert response.status_code == 400
    assert "control character" in response.json()["detail"]


one_tenant_app = FastAPI(dependencies=[Depends(one_value_each)])


@one_tenant_app.get("/items")
async def items(user_id: str, tag: Annotated[list[str] | None, Query()] = None) -> dict[str, object]:
    return {"user_id": user_id, "tags": tag}


def test_a_query_parameter_of_one_value_given_twice_is_refused_a_list_may_repeat() -> None:
    # Given an app whose routes take one user_id and a list of tags
    with TestClient(one_tenant_app) as test_client:
        # When user_id is given twice, Then it is refused rather than read as the last one
        twice = test_client.get("/items", params=[("user_id", "bob"), ("user_id", "alice")])
        assert twice.status_code == 422
        assert twice.json()["detail"][0]["loc"] == ["query", "user_id"]
        # And a list parameter repeats as lists do
        listed = test_client.get("/items", params=[("user_id", "bob"), ("tag", "a"), ("tag", "b")])
        assert listed.json() == {"user_id": "bob", "tags": ["a", "b"]}


def test_an_object_of_a_body_holds_at_most_max_keys() -> None:
    from producers.http.wire import MAX_KEYS

    keys = ", ".join(f'"k{i}": {i}' for i in range(MAX_KEYS))
    assert len(check_json(f"[{{{keys}}}]".encode())[0]) == MAX_KEYS
    with pytest.raises(StrictJsonError, match=f"holds {MAX_KEYS + 1} keys"):
        check_json(f'{{{keys}, "one more": 0}}'.encode())
