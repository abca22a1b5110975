"""A body's read deadline (``BodyDeadline``) and where a body is validated (``JsonBody``): on the
event loop when small, on a worker thread when large. The served app's own tests are
``tests/integration/test_served_limits.py`` and ``test_served_validation.py``."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Annotated, Any

import pytest
from fastapi import Depends, FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.testclient import TestClient
from pydantic import AfterValidator, BaseModel, ConfigDict
from starlette.requests import Request
from starlette.responses import JSONResponse

from producers.http.bodies import JsonBody, add_body_schemas
from producers.http.slow_clients import BodyDeadline
from producers.http.threads import INLINE_BYTES

SCOPE: dict[str, Any] = {
    "type": "http",
    "method": "POST",
    "path": "/",
    "headers": [(b"content-type", b"application/json")],
    "query_string": b"",
}


async def read_all(scope: Any, receive: Any, send: Any) -> None:
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"read"})


def run(app: Any, messages: list[dict[str, Any]], hang: bool) -> tuple[list[dict[str, Any]], float]:
    """What ``app`` sends for a body of ``messages`` (then nothing more, ever, if ``hang``)."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        if hang:
            await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    started = time.monotonic()
    asyncio.run(asyncio.wait_for(app(dict(SCOPE), receive, send), 30))
    return sent, time.monotonic() - started


def test_a_body_not_complete_in_time_is_a_408_and_the_connection_closed() -> None:
    app = BodyDeadline(read_all, timeout=lambda: 0.3)
    sent, took = run(app, [{"type": "http.request", "body": b"{", "more_body": True}], hang=True)
    assert sent[0]["status"] == 408
    assert (b"connection", b"close") in sent[0]["headers"]
    assert b"ENGRAM_API_BODY_TIMEOUT_S" in sent[1]["body"]
    assert 0.3 <= took < 5


def test_a_body_complete_in_time_reaches_the_app_and_a_wait_after_it_has_no_deadline() -> None:
    async def waits_after_the_body(scope: Any, receive: Any, send: Any) -> None:
        await read_all(scope, receive, send)
        await asyncio.sleep(0.5)  # past the deadline
        assert (await receive())["type"] == "http.disconnect"  # not a timeout

    body = [{"type": "http.request", "body": b"{}", "more_body": False}]
    sent, _ = run(BodyDeadline(waits_after_the_body, timeout=lambda: 0.3), body, hang=False)
    assert sent[0]["status"] == 200


validated_on: list[int] = []


def _note_thread(text: str) -> str:
    validated_on.append(threading.get_ident())
    return text


class Note(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: Annotated[str, AfterValidator(_note_thread)]


note_body = JsonBody(Note, "Note")


@pytest.fixture
def notes() -> TestClient:
    app = FastAPI()

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"errors": [list(error["loc"]) for error in exc.errors()]}, 422)

    @app.post("/notes", openapi_extra=note_body.openapi_extra)
    async def take(note: Annotated[Note, Depends(note_body)]) -> dict[str, int]:
        return {"loop": threading.get_ident(), "chars": len(note.text)}

    add_body_schemas(app)
    return TestClient(app)


@pytest.mark.parametrize("size", [10, INLINE_BYTES * 2])
def test_a_large_body_is_validated_on_a_worker_thread_and_a_small_one_in_place(
    notes: TestClient, size: int
) -> None:
    validated_on.clear()
    response = notes.post("/notes", json={"text": "x" * size})
    assert response.status_code == 200, response.text
    on_the_loop = validated_on == [response.json()["loop"]]
    assert on_the_loop == (size <= INLINE_BYTES)


@pytest.mark.parametrize("size", [10, INLINE_BYTES * 2])
def test_an_invalid_body_is_a_422_naming_the_field_from_body(notes: TestClient, size: int) -> None:
    response = notes.post("/notes", json={"text": "x" * size, "other": 1})
    assert response.status_code == 422
    assert response.json()["errors"] == [["body", "other"]]
    assert notes.post("/notes", content=b"").json()["errors"] == [["body"]]


def test_the_openapi_document_describes_the_body_by_its_model(notes: TestClient) -> None:
    spec = notes.get("/openapi.json").json()
    body = spec["paths"]["/notes"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Note"}
    assert spec["components"]["schemas"]["Note"]["required"] == ["text"]
