"""One tenant cannot starve another: each tenant may hold a bounded number of searches queued or
running (``ENGRAM_TENANT_MAX_SEARCHES``) and of ingest requests in flight
(``ENGRAM_TENANT_MAX_INGESTS``), counted in Redis so every app process (and ``engram mcp
--http``) agrees. Past its bound a tenant's request is refused at once with ``TenantBusy`` (429
and ``Retry-After``), before it reaches the queue: a flood from one tenant waits in its own
client, not in the query queue ahead of everyone else's searches.

A slot is a member of a sorted set per tenant and kind, scored by the moment it lapses (the
request's deadline): taken and counted in one Lua script, given back when the request ends, and
dropped by the next taker once lapsed, so a process killed mid-request leaks no slot for longer
than its deadline. The defaults are above what any client of ours sends at once (the bench's 32
searching clients, the SDK's one request at a time per call).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Literal

import redis.asyncio as aioredis
import redis.exceptions

from shared.errors import ServiceUnavailable, TenantBusy

__all__ = ["Kind", "TenantSlots"]

Kind = Literal["search", "ingest"]
PREFIX = "engram:tenant-slots"
SETTING = {"search": "ENGRAM_TENANT_MAX_SEARCHES", "ingest": "ENGRAM_TENANT_MAX_INGESTS"}

# KEYS[1]: the tenant's set; ARGV: now, limit, lapses at, member, the set's own expiry (ms).
_TAKE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local held = redis.call('ZCARD', KEYS[1])
if held >= tonumber(ARGV[2]) then return -held end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return held + 1
"""


class TenantSlots:
    """Slots of each tenant, in the Redis that ``redis`` reaches (an asyncio client)."""

    def __init__(self, redis_client: aioredis.Redis) -> None:
        self._redis = redis_client
        self._take = redis_client.register_script(_TAKE)

    @asynccontextmanager
    async def held(self, kind: Kind, tenant: str, limit: int, lapse_s: float) -> AsyncIterator[int]:
        """A slot of ``tenant``'s ``kind`` for the block, which is given the tenant's slots held
        with this one (a search's fair share, ``workers.fair_share``); ``TenantBusy`` when
        ``limit`` are held. An unreleased slot lapses ``lapse_s`` after it was taken."""
        key = f"{PREFIX}:{kind}:{tenant}"
        member = uuid.uuid4().hex
        now = time.time()
        try:
            args: list[str | int | float] = [now, limit, now + lapse_s, member, int(lapse_s * 1000) + 1000]
            held = int(await self._take(keys=[key], args=args))
        except redis.exceptions.RedisError as exc:
            raise ServiceUnavailable("redis", f"tenant slots cannot be counted: {exc}") from exc
        if held < 0:
            raise TenantBusy(
                f"{-held} {kind} requests of this tenant are in flight ({SETTING[kind]}={limit}); "
                "try again shortly"
            )
        try:
            yield held
        finally:
            with suppress(redis.exceptions.RedisError):  # else it lapses at its deadline
                await self._redis.zrem(key, member)
