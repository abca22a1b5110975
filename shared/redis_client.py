"""The Redis connection every process shares for staging and progress (Celery has its own)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis

from shared.errors import ServiceUnavailable
from shared.settings import Settings

START_HINT = "start it with ./ops/demo, or set ENGRAM_REDIS_URL"


def connect(settings: Settings) -> redis.Redis:
    return redis.Redis.from_url(settings.redis_url, socket_timeout=10, socket_connect_timeout=5)


@contextmanager
def translated_errors() -> Iterator[None]:
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise ServiceUnavailable("redis", str(exc), START_HINT) from exc
