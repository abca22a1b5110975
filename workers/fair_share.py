"""Fair shares of the query worker among tenants (issue 25): a search of a tenant with few
searches in flight is taken before one of a tenant with many, and a tenant alone still has every
slot of the worker.

The query queue is one Celery queue, FIFO: three closed loops of one tenant kept two or three
of its searches ahead of any other tenant's, and the other tenant waited for them all (its p99
3.5x idle's). Capping each tenant's running searches would also cap a tenant alone (issue 28
wants 50 searches/s from one tenant's 8 clients), so the queue is ordered instead: each search
is sent with a message priority from how many searches its tenant already has queued or running
(the count ``producers.http.tenant_slots`` keeps for every app process), and the query worker takes
the lowest number first. A tenant that floods waits behind the others' few searches, and only
behind them; alone, its searches are taken as they come, each level in its own order.

Kombu's Redis transport keeps one list per priority step (the step-0 list is the queue's own
key, where every message without a priority still goes) and the worker's BRPOP names them in
step order; the query worker prefetches no more than it runs (``worker_prefetch_multiplier=1``
and late acks, ``workers.app``), so the order is the one it takes them in. Levels are coarse
past a few searches (ten steps, kombu's bound): 0, 1, 2 and 3 searches in flight each a level
of their own, then 4-5, 6-7, 8-11, 12-15, 16-31, and 32 or more.

Only the steps are set: kombu's separator and queue order (round robin over a worker's queues)
stay its defaults, so the ingest, embed and write queues, whose messages carry no priority, keep
their one list each and their order. The app and the workers must agree on the steps (a message
at a step its worker does not watch waits there until it expires): they are made by one
``make_app`` and deployed together.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from typing import Any, cast

import redis
from kombu.transport.redis import Channel

__all__ = ["PRIORITY_STEPS", "broker_options", "priority", "queue_keys", "queue_lengths"]

PRIORITY_STEPS = tuple(range(10))
"""Kombu's Redis priorities, lowest taken first; kombu clips a message's priority to 0..9."""
_LEVELS = (1, 2, 3, 4, 6, 8, 12, 16, 32)
"""The fewest searches already in flight at each level past 0: level ``i`` from ``_LEVELS[i-1]``."""


def priority(in_flight_before: int) -> int:
    """A search's message priority when its tenant already has ``in_flight_before`` searches
    queued or running: 0 (taken first) for a tenant's only search, up to 9."""
    return bisect_right(_LEVELS, max(in_flight_before, 0))


def broker_options() -> dict[str, Any]:
    """Broker transport options for the priority steps (merged with the app's others)."""
    return {"priority_steps": list(PRIORITY_STEPS)}


def queue_keys(queue: str) -> list[str]:
    """The Redis lists that hold ``queue``'s messages, one per step, named as kombu names them:
    a queue's length is the sum of theirs."""
    return [queue, *(f"{queue}{Channel.sep}{step}" for step in PRIORITY_STEPS[1:])]


def queue_lengths(client: redis.Redis, queues: Iterable[str]) -> dict[str, int]:
    """Each queue's messages waiting, over all its lists, read in one round trip."""
    names = list(queues)
    pipe = client.pipeline(transaction=False)
    for name in names:
        for key in queue_keys(name):
            pipe.llen(key)
    lengths = iter(cast(list[int], pipe.execute()))
    return {name: sum(next(lengths) for _ in PRIORITY_STEPS) for name in names}
