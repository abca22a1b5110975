"""The HTTP SDK's own behaviour, over an in-process transport standing for the app: what it sends,
how it retries "not now" answers, and the typed errors of the others. (Against the real app:
tests/integration/test_http_client.py.)"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from producers.sdk import (
    AsyncEngramHTTP,
    EngramHTTP,
    InvalidRequest,
    NotFound,
    ServerError,
    ServiceUnavailable,
    TooManyRequests,
)
from shared.retry import HttpRetry, retry_after_seconds

ACCEPTED = {"accepted": 1, "version": 3, "document_ids": ["d1"], "task_ids": ["t1"]}


def test_importing_the_sdk_loads_no_celery_neo4j_redis_or_onnxruntime() -> None:
    heavy = ("celery", "neo4j", "onnxruntime", "redis", "qdrant_client", "kombu", "fastapi")
    code = (
        "import producers.sdk, sys; "
        f"loaded = [m for m in {heavy!r} if m in sys.modules]; "
        "assert not loaded, loaded"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


Handler = Callable[[httpx.Request], httpx.Response]


class App:
    """Answers in turn, recording each request."""

    def __init__(self, *answers: httpx.Response) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def problem(
    status: int, detail: str, headers: dict[str, str] | None = None, **extra: object
) -> httpx.Response:
    return httpx.Response(status, json={"detail": detail, **extra}, headers=headers)


def sync_client(app: App, slept: list[float], key: str | None = "egk_k", **options: object) -> EngramHTTP:
    return EngramHTTP(
        "http://engram.test", key, transport=httpx.MockTransport(app), sleep=slept.append, **options
    )


def test_a_document_is_sent_with_the_key_and_the_answer_read_as_the_servers_model() -> None:
    app, slept = App(httpx.Response(202, json=ACCEPTED)), []

    accepted = sync_client(app, slept).ingest({"text": "Maya moved to Lisbon.", "session_id": "s"})

    (request,) = app.requests
    assert (request.method, request.url.path, request.headers["x-api-key"]) == (
        "POST",
        "/api/documents",
        "egk_k",
    )
    assert json.loads(request.content) == {"text": "Maya moved to Lisbon.", "session_id": "s"}
    assert accepted.version == 3 and accepted.document_ids == ["d1"]


def test_a_bearer_key_and_a_batch() -> None:
    app, slept = App(httpx.Response(202, json={**ACCEPTED, "accepted": 2})), []

    sync_client(app, slept, auth="bearer").ingest([{"text": "a"}, {"text": "b", "id": "x"}])

    (request,) = app.requests
    assert request.headers["authorization"] == "Bearer egk_k" and "x-api-key" not in request.headers
    assert json.loads(request.content) == {"documents": [{"text": "a"}, {"text": "b", "id": "x"}]}


def test_force_sends_a_batch_that_asks_for_the_work_again() -> None:
    app, slept = App(httpx.Response(202, json=ACCEPTED)), []

    sync_client(app, slept).ingest({"text": "a", "id": "x"}, force=True)

    (request,) = app.requests
    assert json.loads(request.content) == {"documents": [{"text": "a", "id": "x"}], "force": True}


@pytest.mark.parametrize(
    ("document_id", "raw_path"),
    [
        ("notes/a.md", b"/api/documents/notes%2Fa%2Emd"),
        ("..", b"/api/documents/%2E%2E"),
        ("a b?c#d", b"/api/documents/a%20b%3Fc%23d"),
    ],
)
def test_an_id_is_one_path_segment_whatever_it_holds(document_id: str, raw_path: bytes) -> None:
    status = {"document_id": document_id, "user_id": "u", "state": "done"}
    app, slept = App(httpx.Response(200, json=status)), []

    assert sync_client(app, slept).status(document_id).document_id == document_id

    assert app.requests[0].url.raw_path == raw_path


def test_429_is_retried_after_what_retry_after_asks() -> None:
    app = App(problem(429, "slow down", {"Retry-After": "2"}), httpx.Response(202, json=ACCEPTED))
    slept: list[float] = []

    accepted = sync_client(app, slept).ingest({"text": "x"})

    assert accepted.accepted == 1
    assert len(app.requests) == 2 and slept == [2.0]


def test_503_is_retried_with_backoff_a_bounded_number_of_times_then_raised_with_its_service() -> None:
    app, slept = App(problem(503, "redis is unavailable", service="redis")), []

    with pytest.raises(ServiceUnavailable) as refused:
        sync_client(app, slept, retry=HttpRetry(attempts=3, backoff_base_s=1, backoff_max_s=8)).search(
            "anything"
        )

    assert len(app.requests) == 3
    assert len(slept) == 2 and 0.5 <= slept[0] <= 1 and 1 <= slept[1] <= 2
    assert (refused.value.status, refused.value.service) == (503, "redis")
    assert refused.value.detail == "redis is unavailable"


def test_a_retry_after_beyond_the_cap_is_not_waited_for() -> None:
    app, slept = App(problem(429, "quota", {"Retry-After": "3600"})), []

    with pytest.raises(TooManyRequests) as refused:
        sync_client(app, slept).search("anything")

    assert len(app.requests) == 1 and slept == []
    assert refused.value.retry_after == "3600"


def test_a_4xx_is_never_retried_and_carries_status_detail_and_fields() -> None:
    errors = [{"loc": ["body", "top_k"], "msg": "too large", "type": "less_than_equal"}]
    app, slept = App(problem(422, "invalid request: body.top_k: too large", errors=errors)), []

    with pytest.raises(InvalidRequest) as invalid:
        sync_client(app, slept).search("anything")
    with pytest.raises(NotFound):
        sync_client(App(problem(404, "no document 'd'")), slept).status("d")

    assert len(app.requests) == 1 and slept == []
    assert invalid.value.status == 422 and invalid.value.detail.startswith("invalid request")
    assert [(e.loc, e.msg) for e in invalid.value.errors] == [(["body", "top_k"], "too large")]
    assert str(invalid.value) == "422: invalid request: body.top_k: too large"


def test_an_error_that_is_not_the_apps_body_still_raises_typed() -> None:
    app = App(httpx.Response(502, text="<html>Bad Gateway</html>"))

    with pytest.raises(ServerError) as failed:
        sync_client(app, []).status("d")

    assert failed.value.status == 502 and "Bad Gateway" in failed.value.detail


def test_the_async_client_retries_the_same_way() -> None:
    app = App(problem(503, "busy", {"Retry-After": "1"}, service="api"), httpx.Response(202, json=ACCEPTED))
    slept: list[float] = []

    async def pause(seconds: float) -> None:
        slept.append(seconds)

    async def run() -> int:
        async with AsyncEngramHTTP(
            "http://engram.test", "egk_k", transport=httpx.MockTransport(app), sleep=pause
        ) as engram:
            return (await engram.ingest({"text": "x"})).accepted

    assert asyncio.run(run()) == 1
    assert slept == [1.0] and len(app.requests) == 2


def test_retry_after_reads_seconds_and_http_dates() -> None:
    now = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)

    assert retry_after_seconds("7") == 7.0
    assert retry_after_seconds(format_datetime(now + timedelta(seconds=30), usegmt=True), now) == 30.0
    assert retry_after_seconds(format_datetime(now - timedelta(seconds=30), usegmt=True), now) == 0.0
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds(None) is None


def test_only_not_now_answers_are_retried_and_only_so_often() -> None:
    policy = HttpRetry(attempts=2)

    assert policy.delay(429, "3", 1) == 3.0
    assert policy.delay(429, "3", 2) is None
    assert policy.delay(500, None, 1) is None
    assert policy.delay(401, "3", 1) is None
