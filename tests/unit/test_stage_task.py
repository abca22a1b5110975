"""A stage task that cannot reach the broker hands its message back rather than dropping it, and
one its hard time limit killed is sent again while the retry policy gives it tries."""

from __future__ import annotations

from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

import fakeredis
import pytest
from celery.exceptions import Reject
from kombu.exceptions import OperationalError

from shared.errors import ServiceUnavailable
from shared.ids import document_key
from shared.ledger import Ledger, Sent
from shared.retry import RetryPolicy
from workers.app import EMBED_TASK, WRITE_TASK
from workers.ingest import parse
from workers.messages import batch_refs
from workers.stage import _retry, send_again_after_hard_limit, send_next


class UnsentRetryTask:
    """A task whose retry Celery could not publish: Celery raises a rejection that drops the message."""

    name = "engram.test"

    def retry(self, exc: BaseException, **options: Any) -> None:
        raise Reject(AttributeError("'NoneType' object has no attribute 'client'"), requeue=False)


class BrokerDownTask:
    name = "engram.test"

    def __init__(self, error: BaseException) -> None:
        def send_task(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], task_id: str) -> None:
            raise error

        self.app = SimpleNamespace(send_task=send_task)


class FakeLedger:
    """The ledger as a sender sees it: what was recorded, and what was struck again."""

    def __init__(self) -> None:
        self.owed: dict[str, Sent] = {}
        self.struck: list[str] = []

    def record(self, name: str, queue: str, args: Iterable[Any], kwargs: dict[str, Any]) -> Sent:
        sent = Sent(f"t{len(self.owed) + len(self.struck)}", name, queue, list(args), kwargs, 0.0)
        self.owed[sent.task_id] = sent
        return sent

    def strike(self, task_id: str) -> None:
        self.owed.pop(task_id, None)
        self.struck.append(task_id)


def test_a_retry_the_broker_cannot_take_requeues_the_message() -> None:
    with pytest.raises(Reject) as rejected:
        _retry(UnsentRetryTask(), ServiceUnavailable("redis", "connection refused"), countdown=1)
    assert rejected.value.requeue is True


@pytest.mark.parametrize(
    "error",
    [OperationalError("Error 111 connecting"), AttributeError("'NoneType' object has no attribute 'client'")],
)
def test_a_next_stage_the_broker_cannot_take_requeues_the_message(error: BaseException) -> None:
    ledger = FakeLedger()
    with pytest.raises(Reject) as rejected:
        send_next(BrokerDownTask(error), EMBED_TASK, ("batch",), {"documents": []}, ledger)
    assert rejected.value.requeue is True
    assert ledger.owed == {} and len(ledger.struck) == 1  # the unsent message is owed to no one


def test_a_send_that_fails_for_another_reason_is_not_retried_forever() -> None:
    with pytest.raises(TypeError):
        send_next(BrokerDownTask(TypeError("not serialisable")), WRITE_TASK, ("batch",), {}, FakeLedger())


def test_a_next_stage_is_recorded_before_it_is_sent_under_the_ledgers_task_id() -> None:
    # Given a broker that takes the message, and a ledger
    ledger = FakeLedger()
    seen: list[tuple[str, str, bool]] = []

    def send_task(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], task_id: str) -> None:
        seen.append((name, task_id, task_id in ledger.owed))

    task = SimpleNamespace(name="engram.test", app=SimpleNamespace(send_task=send_task))

    # When the next stage is sent
    send_next(task, WRITE_TASK, ("batch",), {"documents": [["k", 1]]}, ledger)

    # Then it was owed in the ledger when it went out, under the id it was sent with
    assert seen == [(WRITE_TASK, "t0", True)]
    assert ledger.owed["t0"].queue == "write" and ledger.owed["t0"].args == ["batch"]


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


def test_a_task_killed_by_its_hard_time_limit_is_sent_again_as_often_as_the_policy_says() -> None:
    # Given a write message in the ledger, and a policy giving three more tries after a time limit
    ledger = Ledger(fakeredis.FakeRedis(), clock=lambda: 1000.0)
    recorded = ledger.record(WRITE_TASK, "write", ("batch",), {"documents": [["k", 1]]})
    policy = RetryPolicy(budget_s=3600, backoff_max_s=25, time_limit_retries=3)
    sent: list[Sent] = []

    # When its task is killed by the hard limit each time it runs
    tries = [send_again_after_hard_limit(ledger, policy, sent.append, recorded.task_id) for _ in range(4)]

    # Then its message is sent again, as it was and under its id, three times; the fourth kill
    # gives it up (on_failure records its documents failed), and it stays owed until then
    assert tries == [True, True, True, False]
    assert {(s.task_id, s.name, tuple(s.args)) for s in sent} == {(recorded.task_id, WRITE_TASK, ("batch",))}
    owed = ledger.owed(recorded.task_id)
    assert owed is not None and owed.resends == 3


def test_a_task_no_longer_owed_is_not_sent_again_after_a_hard_limit() -> None:
    ledger = Ledger(fakeredis.FakeRedis())
    sent: list[Sent] = []
    policy = RetryPolicy(budget_s=3600, backoff_max_s=25)
    assert send_again_after_hard_limit(ledger, policy, sent.append, "struck-long-ago") is False
    assert sent == []
