"""A stage task that cannot reach the broker hands its message back rather than dropping it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from celery.exceptions import Reject
from kombu.exceptions import OperationalError

from shared.errors import ServiceUnavailable
from shared.ids import document_key
from workers.ingest import parse
from workers.stage import _retry, batch_refs, send_next


class UnsentRetryTask:
    """A task whose retry Celery could not publish: Celery raises a rejection that drops the message."""

    name = "engram.test"

    def retry(self, exc: BaseException, **options: Any) -> None:
        raise Reject(AttributeError("'NoneType' object has no attribute 'client'"), requeue=False)


class BrokerDownTask:
    name = "engram.test"

    def __init__(self, error: BaseException) -> None:
        def send_task(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            raise error

        self.app = SimpleNamespace(send_task=send_task)


def test_a_retry_the_broker_cannot_take_requeues_the_message() -> None:
    with pytest.raises(Reject) as rejected:
        _retry(UnsentRetryTask(), ServiceUnavailable("redis", "connection refused"), countdown=1)
    assert rejected.value.requeue is True


@pytest.mark.parametrize(
    "error",
    [OperationalError("Error 111 connecting"), AttributeError("'NoneType' object has no attribute 'client'")],
)
def test_a_next_stage_the_broker_cannot_take_requeues_the_message(error: BaseException) -> None:
    with pytest.raises(Reject) as rejected:
        send_next(BrokerDownTask(error), "engram.embed.embed_batch", ("batch",), {"documents": []})
    assert rejected.value.requeue is True


def test_a_send_that_fails_for_another_reason_is_not_retried_forever() -> None:
    with pytest.raises(TypeError):
        send_next(BrokerDownTask(TypeError("not serialisable")), "engram.x", ("batch",), {})


def test_a_document_that_no_longer_validates_is_refused_alone() -> None:
    message = [
        {"user_id": "alice", "id": "good", "text": "Fine text.", "version": 3},
        {"user_id": "alice", "id": "marks", "text": "\u0301\u0302", "version": 3},
        {"user_id": "alice", "text": "no version"},
    ]

    parsed = parse(message)

    assert [a.document.document_id for a in parsed.accepted] == ["good"]
    assert [ref for ref, _ in parsed.refused] == [(document_key("alice", "marks"), 3)]
    assert "nothing to read" in parsed.refused[0][1]


def test_a_forced_document_is_marked_so_and_still_named_when_its_batch_fails() -> None:
    message = [
        {"user_id": "alice", "id": "again", "text": "Redo me.", "version": 4, "force": True},
        {"user_id": "alice", "id": "plain", "text": "Leave me.", "version": 4},
    ]

    parsed = parse(message)

    assert [(a.document.document_id, a.force) for a in parsed.accepted] == [("again", True), ("plain", False)]
    assert batch_refs((message,), {}) == [
        (document_key("alice", "again"), 4),
        (document_key("alice", "plain"), 4),
    ]
