"""Fair shares of the query worker (workers/fair_share.py): a search's priority from its tenant's
searches in flight, and what the app's broker options make of priorities, through kombu's own
Redis transport on a fake Redis."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import fakeredis
import pytest
from kombu import Connection
from kombu.transport import redis as kombu_redis

from producers.http.tenant_slots import TenantSlots
from workers import fair_share
from workers.app import CHUNK_TASK, INGEST, QUERY, QUEUES, SEARCH_TASK, make_app


def test_a_tenants_only_search_comes_first_and_more_in_flight_come_later() -> None:
    levels = [fair_share.priority(n) for n in range(100)]

    assert levels[:5] == [0, 1, 2, 3, 4]  # 0 to 3 in flight: a level each
    assert levels == sorted(levels)  # more in flight never comes earlier
    assert set(levels) == set(fair_share.PRIORITY_STEPS)  # every step used, none past them
    assert fair_share.priority(31) == 8 and fair_share.priority(32) == fair_share.priority(10_000) == 9
    assert fair_share.priority(-1) == 0


def test_the_broker_options_add_the_steps_and_keep_the_others() -> None:
    options = make_app(results=False).conf.broker_transport_options

    assert options["priority_steps"] == list(fair_share.PRIORITY_STEPS)
    # kombu's separator and round-robin queue order stay its defaults (keys and bindings as before)
    assert "sep" not in options and "queue_order_strategy" not in options


@pytest.fixture
def broker() -> Iterator[tuple[Connection, fakeredis.FakeRedis]]:
    """A kombu connection with the app's broker options, over kombu's Redis transport on a fake Redis."""
    server = fakeredis.FakeServer()

    class FakeServerConnection(fakeredis.FakeRedisConnection):  # type: ignore[misc]
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **{**kwargs, "server": server})

    class Channel(kombu_redis.Channel):  # type: ignore[misc]
        connection_class = FakeServerConnection

    class Transport(kombu_redis.Transport):  # type: ignore[misc]
        pass

    Transport.Channel = Channel
    options = make_app(results=False).conf.broker_transport_options
    with Connection("redis://fake:6379/0", transport=Transport, transport_options=options) as connection:
        yield connection, fakeredis.FakeRedis(server=server)


def _send(connection: Connection, name: str, priority: int | None = None) -> str:
    sender, task_id = make_app(results=False), uuid.uuid4().hex
    extra = {} if priority is None else {"priority": priority}
    sender.send_task(name, args=({},), task_id=task_id, producer=connection.Producer(), **extra)
    return task_id


def _taken(connection: Connection, queue: str) -> list[str]:
    channel, taken = connection.default_channel, []
    while (message := channel.basic_get(queue, no_ack=True)) is not None:
        taken.append(message.headers["id"])
    return taken


def test_searches_are_taken_by_priority_and_in_order_within_one(
    broker: tuple[Connection, fakeredis.FakeRedis],
) -> None:
    connection, redis = broker
    # Given a flooding tenant's searches queued first, then a quiet tenant's only one
    flood = [_send(connection, SEARCH_TASK, fair_share.priority(n)) for n in (2, 3, 3)]
    quiet = _send(connection, SEARCH_TASK, fair_share.priority(0))

    # Then the queue counts them all, over its lists
    assert fair_share.queue_lengths(redis, QUEUES)[QUERY] == 4

    # And the quiet tenant's comes out first, the flood's after it in their order
    assert _taken(connection, QUERY) == [quiet, *flood]


def test_messages_without_a_priority_keep_their_one_list(
    broker: tuple[Connection, fakeredis.FakeRedis],
) -> None:
    connection, redis = broker
    # Given stage messages, sent as ever (no priority)
    sent = [_send(connection, CHUNK_TASK) for _ in range(3)]

    # Then they are in the queue's own list alone, and come out first in first out
    assert redis.llen(INGEST) == 3
    assert [key for key in redis.keys(f"{INGEST}*") if key != INGEST.encode()] == []
    assert _taken(connection, INGEST) == sent


def test_a_slot_tells_how_many_of_its_tenant_are_held_with_it() -> None:
    async def run() -> list[int]:
        slots = TenantSlots(fakeredis.FakeAsyncRedis())
        async with (
            slots.held("search", "a", 8, 30) as first,
            slots.held("search", "a", 8, 30) as second,
            slots.held("search", "b", 8, 30) as other,
        ):
            pass
        async with slots.held("search", "a", 8, 30) as again:
            return [first, second, other, again]

    assert asyncio.run(run()) == [1, 2, 1, 1]
