"""The redeliverer: which owed messages it sends again, judged against what the broker holds."""

from __future__ import annotations

from dataclasses import replace

from shared.ledger import BrokerHolds, Sent
from shared.services.redeliver import Redelivered, Redeliverer


class FakeLedger:
    def __init__(self, entries: list[Sent]) -> None:
        self.entries = {s.task_id: s for s in entries}
        self.asked_before: float | None = None

    def older_than(self, before: float, limit: int) -> list[Sent]:
        self.asked_before = before
        return [s for s in self.entries.values() if s.at < before][:limit]

    def resent(self, sent: Sent) -> None:
        self.entries[sent.task_id] = replace(sent, at=10_000.0, resends=sent.resends + 1)

    def strike(self, task_id: str) -> None:
        del self.entries[task_id]


def no_give_up(sent: Sent, reason: str) -> None:
    raise AssertionError(f"gave up on {sent.task_id}")


def sent(task_id: str, queue: str, at: float = 0.0) -> Sent:
    return Sent(task_id, f"engram.{queue}", queue, [task_id], {}, at)


def test_only_a_message_the_broker_holds_no_copy_of_is_sent_again() -> None:
    # Given four owed messages: one queued, one running, one lost, one in a queue too long to read
    ledger = FakeLedger(
        [sent("queued", "embed"), sent("running", "write"), sent("lost", "embed"), sent("behind", "ingest")]
    )
    holds = BrokerHolds(frozenset({"queued", "running"}), unread=frozenset({"ingest"}))
    resent: list[Sent] = []
    redeliverer = Redeliverer(
        ledger, lambda: holds, resent.append, no_give_up, grace_s=60, clock=lambda: 1000.0
    )

    # When a pass runs
    outcome = redeliverer.run()

    # Then only the lost one is sent again, as it was; the long queue's waits for its turn
    assert outcome == Redelivered(resent=1, waiting=1)
    assert [(s.task_id, s.name, s.args) for s in resent] == [("lost", "engram.embed", ["lost"])]
    assert ledger.asked_before == 940.0
    assert ledger.entries["lost"].at == 10_000.0  # its grace starts again


def test_nothing_within_its_grace_is_judged_and_the_broker_is_not_read() -> None:
    ledger = FakeLedger([sent("young", "embed", at=990.0)])

    def holds() -> BrokerHolds:
        raise AssertionError("the broker was read with nothing due")

    resent: list[Sent] = []
    outcome = Redeliverer(ledger, holds, resent.append, no_give_up, grace_s=60, clock=lambda: 1000.0).run()

    assert outcome == Redelivered(0, 0)
    assert resent == []


def test_a_message_lost_after_every_resend_is_given_up_and_its_documents_fail() -> None:
    # Given a message already sent again five times, lost once more
    ledger = FakeLedger([replace(sent("poison", "embed"), resends=5)])
    holds = BrokerHolds(frozenset(), unread=frozenset())
    failed: list[tuple[str, str]] = []
    resent: list[Sent] = []

    # When a pass runs
    outcome = Redeliverer(
        ledger,
        lambda: holds,
        resent.append,
        lambda s, reason: failed.append((s.task_id, reason)),
        grace_s=60,
        clock=lambda: 1000.0,
    ).run()

    # Then it is not sent a sixth time: its documents are failed with the reason, and it is owed no more
    assert outcome == Redelivered(resent=0, waiting=0, given_up=1)
    assert resent == [] and ledger.entries == {}
    assert failed == [("poison", "engram.embed: its message was lost 6 times (its worker died each time)")]
