"""Sends again the stage messages the broker lost (shared/ledger.py says how it loses them).

A message the ledger has held for longer than the grace is lost when the broker holds no copy of
it at one instant: not in its queue, not delivered and unacknowledged (a running task, a retry
waiting for its countdown and a prefetched message are all in ``unacked``). The grace outlasts the
moments a live message is in neither place: between the ledger's write and the send (a send
retried through a Redis restart), and between a worker's BRPOP and its record in ``unacked``. A
queue too long to read is judged once it has drained; until then its messages wait, as they
would behind the backlog anyway. A message sent again keeps its task id, so the chunk stage
stages the same batch; a false alarm is one more run of an idempotent stage. A message lost again
after ``max_resends`` sends (one that kills its worker, or outlasts the hard time limit, each
time) is given up: its documents are recorded ``failed`` with the reason.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from shared.ledger import BrokerHolds, Sent

log = logging.getLogger(__name__)


class SentMessages(Protocol):
    def older_than(self, before: float, limit: int) -> list[Sent]: ...

    def resent(self, sent: Sent) -> None: ...

    def strike(self, task_id: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Redelivered:
    resent: int  # messages sent again
    waiting: int  # past the grace, in a queue too long to read this pass
    given_up: int = 0  # lost after every resend: their documents recorded failed


class Redeliverer:
    def __init__(
        self,
        ledger: SentMessages,
        holds: Callable[[], BrokerHolds],
        send: Callable[[Sent], None],
        give_up: Callable[[Sent, str], None],
        grace_s: float,
        max_resends: int = 5,
        limit: int = 1000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._ledger = ledger
        self._holds = holds
        self._send = send
        self._give_up = give_up
        self._grace_s = grace_s
        self._max_resends = max_resends
        self._limit = limit
        self._clock = clock

    def run(self) -> Redelivered:
        due = self._ledger.older_than(self._clock() - self._grace_s, self._limit)
        if not due:
            return Redelivered(0, 0)
        holds = self._holds()
        resent = waiting = given_up = 0
        for sent in due:
            if not holds.judged(sent.queue):
                waiting += 1
            elif sent.task_id in holds.task_ids:
                continue
            elif sent.resends >= self._max_resends:
                # Gone after every send, its task never ending: a message that kills its worker,
                # or outlasts the hard time limit, each time. Its documents end failed.
                reason = (
                    f"{sent.name}: its message was lost {sent.resends + 1} times (its worker died each time)"
                )
                log.error("stage message %s given up: %s", sent.task_id, reason)
                self._give_up(sent, reason)
                self._ledger.strike(sent.task_id)
                given_up += 1
            else:
                log.warning("the broker lost stage message %s (%s): sent again", sent.task_id, sent.name)
                self._send(sent)
                self._ledger.resent(sent)
                resent += 1
        return Redelivered(resent, waiting, given_up)
