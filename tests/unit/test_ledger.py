"""The ledger of stage messages and what the broker holds, on fakeredis with kombu's own layout."""

from __future__ import annotations

import json
from typing import Any

import fakeredis
import pytest

from shared.ledger import UNACKED, Ledger, broker_holds


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def kombu_message(task_id: str, body: str = "e30=") -> str:
    """A message as kombu's Redis transport LPUSHes it: headers carry Celery's task id."""
    return json.dumps({"body": body, "headers": {"id": task_id, "task": "engram.embed.embed_batch"}})


@pytest.fixture
def client() -> Any:
    return fakeredis.FakeRedis()


def test_a_recorded_message_is_owed_until_struck(client: Any) -> None:
    # Given two messages recorded a minute apart
    clock = Clock()
    ledger = Ledger(client, clock)
    first = ledger.record("engram.embed.embed_batch", "embed", ("b1",), {"documents": [["k", 1]]})
    clock.now += 60
    second = ledger.record("engram.write.write_batch", "write", ("b2",), {})

    # When the older ones are asked for, and then the first is struck
    older = ledger.older_than(clock.now - 30, 10)
    ledger.strike(first.task_id)

    # Then the first came back as sent, and only the second is owed now
    assert [(s.task_id, s.name, s.queue, s.args, s.kwargs) for s in older] == [
        (first.task_id, "engram.embed.embed_batch", "embed", ["b1"], {"documents": [["k", 1]]})
    ]
    assert ledger.older_than(clock.now + 1, 10) == [second]
    assert ledger.size() == 1


def test_a_message_sent_again_waits_its_grace_again(client: Any) -> None:
    clock = Clock()
    ledger = Ledger(client, clock)
    sent = ledger.record("engram.ingest.chunk_documents", "ingest", ([{"id": "d"}],), {})
    clock.now += 100

    ledger.resent(sent)

    assert ledger.older_than(clock.now - 50, 10) == []
    (again,) = ledger.older_than(clock.now + 1, 10)
    assert (again.task_id, again.resends, again.args) == (sent.task_id, 1, sent.args)


def test_a_struck_task_is_not_written_back_by_resent(client: Any) -> None:
    # A pass that sends again just as the task ends must not leave an index with no entry
    ledger = Ledger(client, Clock())
    sent = ledger.record("engram.write.write_batch", "write", ("b",), {})
    ledger.strike(sent.task_id)

    ledger.resent(sent)

    assert ledger.size() == 0


def test_the_broker_holds_queued_and_unacknowledged_messages(client: Any) -> None:
    # Given one message queued, one delivered and unacknowledged, and a queue too long to read
    client.lpush("embed", kombu_message("queued-1"))
    client.hset(UNACKED, "tag-1", json.dumps([json.loads(kombu_message("running-1")), "", "write"]))
    for n in range(5):
        client.lpush("ingest", kombu_message(f"waiting-{n}"))

    # When the broker is read with queues of at most three messages
    holds = broker_holds(client, ["ingest", "embed", "write"], read_at_most=3)

    # Then both are found, and the long queue is not judged
    assert holds.task_ids == {"queued-1", "running-1"}
    assert holds.judged("embed") and holds.judged("write")
    assert not holds.judged("ingest")


def test_an_unreadable_message_is_skipped_not_fatal(client: Any) -> None:
    client.lpush("write", b"not json")
    client.lpush("write", kombu_message("fine"))

    assert broker_holds(client, ["write"], read_at_most=10).task_ids == {"fine"}
