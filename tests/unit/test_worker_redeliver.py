"""The lost-message pass every worker offers to run (workers/redeliver.py), on fakeredis with the
ledger and kombu's layout: one worker of all runs it each interval, and a message a killed worker
took off its queue (in the ledger, in no queue and not in ``unacked``) is sent again by it, with no
beat and no reconciler."""

from __future__ import annotations

import json
import time
from typing import Any

import fakeredis

from shared.ledger import UNACKED, Ledger, Sent, broker_holds
from shared.services.redeliver import Redelivered, Redeliverer
from workers.redeliver import interval_s, sweep_once


def redeliverer(client: Any, ledger: Ledger, resent: list[Sent], now: float) -> Redeliverer:
    def give_up(sent: Sent, reason: str) -> None:
        raise AssertionError(f"gave up on {sent.task_id}")

    return Redeliverer(
        ledger,
        lambda: broker_holds(client, ["ingest", "embed", "write"], read_at_most=200),
        resent.append,
        give_up,
        grace_s=60,
        clock=lambda: now,
    )


def test_a_write_message_taken_by_a_killed_worker_is_sent_again_by_a_live_one() -> None:
    # Given two write messages sent 90 s ago: one running on a live worker (in unacked), and
    # one a worker took with BRPOP and died before recording it (in neither place)
    client = fakeredis.FakeRedis()
    ledger = Ledger(client, clock=lambda: 1000.0)
    running = ledger.record("engram.write.write_batch", "write", ("b1",), {"documents": [["k1", 1]]})
    lost = ledger.record("engram.write.write_batch", "write", ("b2",), {"documents": [["k2", 1]]})
    client.hset(UNACKED, "tag-1", json.dumps([{"headers": {"id": running.task_id}}, "write", "write"]))
    resent: list[Sent] = []

    # When a live worker's sweep runs, with nothing else (no beat, no reconcile task)
    outcome = sweep_once(ledger, redeliverer(client, ledger, resent, now=1090.0), "write@hosta", 30)

    # Then the lost one, and only it, is sent again under its own task id
    assert outcome == Redelivered(resent=1, waiting=0)
    assert [s.task_id for s in resent] == [lost.task_id]


def test_one_worker_of_all_runs_the_pass_each_interval() -> None:
    # Given a lost message, and two workers (two hosts) sharing one Redis
    client = fakeredis.FakeRedis()
    ledger = Ledger(client, clock=lambda: 1000.0)
    ledger.record("engram.embed.embed_batch", "embed", ("b1",), {"documents": [["k1", 1]]})
    resent: list[Sent] = []
    every_s = 0.3

    # When both offer at once, and again once the interval has passed
    first = sweep_once(ledger, redeliverer(client, ledger, resent, 1090.0), "embed@hosta", every_s)
    second = sweep_once(ledger, redeliverer(client, ledger, resent, 1090.0), "embed@hostb", every_s)
    time.sleep(every_s + 0.2)
    later = sweep_once(ledger, redeliverer(client, ledger, resent, 1200.0), "embed@hostb", every_s)

    # Then one of the two ran it, and the claim freed itself for the next interval
    assert first is not None and first.resent == 1
    assert second is None
    assert later is not None
    assert len(resent) == 2  # not held anywhere still (fakeredis holds no queue): sent again


def test_a_lost_message_is_looked_for_twice_a_grace() -> None:
    assert interval_s(60) == 30
    assert interval_s(1) == 1.0
