"""The ledger of stage messages, kept in Redis beside the queues.

Every ingest, embed and write message is written here before it is sent, and struck off once its
task has ended for good (done, or failed with its documents recorded ``failed``). Kombu's Redis
transport can lose a message: BRPOP takes it off its queue and only afterwards is it recorded in
``unacked``, so a worker killed, or cut from Redis, in between drops it, and nothing would ever
finish its documents (celery/kombu#1836, celery/celery#7950; our chaos soak lost a batch so). The
reconciler's pass sends again a message the ledger holds and the broker does not
(shared/services/redeliver.py). Every stage is idempotent, so a message sent twice costs work,
never correctness.

An ingest message is held twice while it waits (in its queue and here): the ledger's share of
Redis is the texts of the batches not chunked yet.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Protocol, cast

import redis

from shared.redis_client import translated_errors

_ENTRIES = "engram:ledger"
_SENT_AT = "engram:ledger:at"
_PASS = "engram:ledger:pass"  # who runs the lost-message pass this interval (workers/redeliver.py)
UNACKED = "unacked"  # kombu's hash of delivered, unacknowledged messages (its default name)
_RESENT = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
end
"""


@dataclass(frozen=True, slots=True)
class Sent:
    """A stage message as it was sent: enough to send it again under the same task id."""

    task_id: str
    name: str
    queue: str
    args: list[Any]
    kwargs: dict[str, Any]
    at: float
    resends: int = 0  # times the reconciler sent it again

    def dump(self) -> str:
        fields = {"name": self.name, "queue": self.queue, "args": self.args, "kwargs": self.kwargs}
        return json.dumps({**fields, "at": self.at, "resends": self.resends})

    @classmethod
    def load(cls, task_id: str, raw: bytes | str) -> Sent:
        f = json.loads(raw)
        return cls(task_id, f["name"], f["queue"], f["args"], f["kwargs"], f["at"], int(f.get("resends", 0)))


class Owed(Protocol):
    """What a sender needs of the ledger."""

    def record(self, name: str, queue: str, args: Iterable[Any], kwargs: dict[str, Any]) -> Sent: ...

    def strike(self, task_id: str) -> None: ...


class Ledger:
    def __init__(self, client: redis.Redis, clock: Callable[[], float] = time.time) -> None:
        self._redis = client
        self._clock = clock
        self._resent = client.register_script(_RESENT)  # EVALSHA: the script is sent once

    def record(self, name: str, queue: str, args: Iterable[Any], kwargs: dict[str, Any]) -> Sent:
        """Writes a message about to be sent, under a new task id (raises ServiceUnavailable)."""
        sent = Sent(str(uuid.uuid4()), name, queue, list(args), dict(kwargs), self._clock())
        with translated_errors():
            pipe = self._redis.pipeline(transaction=True)
            pipe.hset(_ENTRIES, sent.task_id, sent.dump())
            pipe.zadd(_SENT_AT, {sent.task_id: sent.at})
            pipe.execute()
        return sent

    def strike(self, task_id: str) -> None:
        """The task ended for good: its message is no longer owed to anyone."""
        with translated_errors():
            pipe = self._redis.pipeline(transaction=True)
            pipe.hdel(_ENTRIES, task_id)
            pipe.zrem(_SENT_AT, task_id)
            pipe.execute()

    def resent(self, sent: Sent) -> None:
        """Sent again now: counted, and the next pass waits its grace again before judging it. A
        task struck meanwhile (it ended) stays struck."""
        again = replace(sent, at=self._clock(), resends=sent.resends + 1)
        with translated_errors():
            self._resent(keys=[_ENTRIES, _SENT_AT], args=[sent.task_id, again.dump(), str(again.at)])

    def owed(self, task_id: str) -> Sent | None:
        """The message of this task id as the ledger holds it, or None once struck."""
        with translated_errors():
            raw = cast(bytes | None, self._redis.hget(_ENTRIES, task_id))
        return None if raw is None else Sent.load(task_id, raw)

    def older_than(self, before: float, limit: int) -> list[Sent]:
        """The oldest messages sent before ``before`` (epoch seconds), at most ``limit``."""
        with translated_errors():
            ids = cast(list[bytes], self._redis.zrangebyscore(_SENT_AT, "-inf", before, start=0, num=limit))
            if not ids:
                return []
            raws = cast(list[bytes | None], self._redis.hmget(_ENTRIES, ids))
        found: list[Sent] = []
        for raw_id, raw in zip(ids, raws, strict=True):
            task_id = raw_id.decode()
            if raw is None:  # struck between the two reads, or an index left by an older version
                self.strike(task_id)
                continue
            found.append(Sent.load(task_id, raw))
        return found

    def size(self) -> int:
        with translated_errors():
            return cast(int, self._redis.zcard(_SENT_AT))

    def claim_pass(self, owner: str, interval_s: float) -> bool:
        """True for the one caller, of every process on every host, that runs the lost-message pass
        in this interval: the claim frees itself after ``interval_s``, whoever made it and
        whether or not it lives."""
        with translated_errors():
            return bool(self._redis.set(_PASS, owner, nx=True, px=max(int(interval_s * 1000), 1)))


@dataclass(frozen=True, slots=True)
class BrokerHolds:
    """What the broker holds at one instant: the task ids queued (in queues short enough to read)
    or delivered and unacknowledged, and the queues too long to read."""

    task_ids: frozenset[str]
    unread: frozenset[str]

    def judged(self, queue: str) -> bool:
        return queue not in self.unread


def _task_id(raw: bytes) -> str | None:
    try:
        message = json.loads(raw)
        if isinstance(message, list):  # an unacked entry: [message, exchange, routing key]
            message = message[0]
        return str(message["headers"]["id"])
    except (ValueError, KeyError, TypeError, IndexError):
        return None


def broker_holds(client: redis.Redis, queues: Iterable[str], read_at_most: int) -> BrokerHolds:
    """The broker's messages in one MULTI, so none is seen moving from a queue to ``unacked``
    between two reads. A queue longer than ``read_at_most`` is not read (an ingest message holds
    its batch's texts): its messages are judged once it has drained that far."""
    names = list(queues)
    with translated_errors():
        pipe = client.pipeline(transaction=True)
        for name in names:
            pipe.llen(name)
        pipe.hvals(UNACKED)
        for name in names:
            pipe.lrange(name, -read_at_most, -1)  # the consuming end: the oldest
        replies = pipe.execute()
    lengths = [int(n) for n in replies[: len(names)]]
    unacked = cast(list[bytes], replies[len(names)])
    queued = cast(list[list[bytes]], replies[len(names) + 1 :])
    unread = frozenset(name for name, length in zip(names, lengths, strict=True) if length > read_at_most)
    ids = {_task_id(raw) for raw in unacked}
    for name, messages in zip(names, queued, strict=True):
        if name not in unread:
            ids.update(_task_id(raw) for raw in messages)
    return BrokerHolds(frozenset(i for i in ids if i is not None), unread)
