"""Redis refusing writes at its maxmemory is a 503-kind error naming it, however it is wrapped."""

from __future__ import annotations

import kombu.exceptions
import pytest
import redis

from producers.client import queue_errors
from shared.errors import ServiceUnavailable
from shared.redis_client import FULL_HINT, translated_errors

REFUSAL = "command not allowed when used memory > 'maxmemory'."


def test_a_refused_write_from_redis_py_is_service_unavailable_naming_maxmemory() -> None:
    with pytest.raises(ServiceUnavailable) as raised, translated_errors():
        raise redis.OutOfMemoryError(REFUSAL)

    assert raised.value.service == "redis" and raised.value.hint == FULL_HINT
    assert str(raised.value).startswith("redis is unavailable: out of memory (maxmemory reached)")


def test_a_refused_send_wrapped_by_kombu_is_out_of_memory_not_a_redis_to_start() -> None:
    def send() -> None:
        try:
            raise redis.OutOfMemoryError(f"Command # 1 (LLEN ingest) of pipeline caused error: {REFUSAL}")
        except redis.OutOfMemoryError as exc:
            raise kombu.exceptions.OperationalError(str(exc)) from exc

    with pytest.raises(ServiceUnavailable) as raised, queue_errors():
        send()

    assert raised.value.hint == FULL_HINT and "out of memory (maxmemory reached)" in raised.value.detail


def test_a_lost_connection_under_kombu_still_says_to_start_redis() -> None:
    with pytest.raises(ServiceUnavailable) as raised, queue_errors():
        raise kombu.exceptions.OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    assert raised.value.hint != FULL_HINT and "Connection refused" in raised.value.detail
