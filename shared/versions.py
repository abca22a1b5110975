"""The version every write of a document carries, fixed when a producer accepts it.

Versions come from one clock for every producer: Redis's own time in microseconds, never below
the last version handed out, so two producers on machines whose clocks differ still order their
writes as Redis saw them, and a restarted Redis (even one that lost its data) keeps counting up
from the time of day.
"""

from __future__ import annotations

import redis

from shared.redis_client import translated_errors

_KEY = "engram:version"

_NEXT = """
local now = redis.call('TIME')
local version = tonumber(now[1]) * 1000000 + tonumber(now[2])
local last = tonumber(redis.call('GET', KEYS[1]) or '0')
if version <= last then version = last + 1 end
redis.call('SET', KEYS[1], string.format('%.0f', version))
return version
"""


class VersionClock:
    def __init__(self, client: redis.Redis) -> None:
        self._next = client.register_script(_NEXT)

    def next(self) -> int:
        with translated_errors():
            return int(self._next(keys=[_KEY]))
