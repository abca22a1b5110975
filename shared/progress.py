"""Where each document is in the pipeline, kept in Redis for the status endpoint and the CLI.

Neo4j says what is stored; this says what is still on its way (queued, chunking, ...) or why it
failed, which Neo4j cannot know. Every record carries the version of the ingestion it is about,
and an update never moves a record backwards: an older version's news, or an earlier stage's
news about the same version arriving late (a producer marking "queued" after the worker already
started), is dropped. So the order in which producers and workers write does not matter.

Failed documents are indexed as they fail (``engram:failed``, and ``engram:failed:t:<tenant>``
once the record is named), scored by the moment of failure: the status page reads a tenant's
newest failures from its index, never by scanning every tenant's records. An entry whose
record expired or left ``failed`` is dropped when read.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import cast

import redis

from shared.models import DocumentState, utc_now
from shared.redis_client import translated_errors

_PREFIX = "engram:doc:"
# The newest ingestions' document keys, scored by version: every tenant's, and each tenant's own.
_RECENT = "engram:recent"
RECENT_KEPT = 1000
RECENT_KEPT_A_TENANT = 200
_FAILED = "engram:failed"
_FAILED_OF = "engram:failed:t:"  # + tenant
# Set once the records failed before the index existed are in it (one scan, on first read).
_FAILED_INDEXED = "engram:failed-indexed"

# A version that is done stays done: a late failure of the same version (a duplicate delivery
# finding its batch already cleaned up) cannot mark stored memories failed; a failed version can
# still end done (a retry or a replay that lands).
RANK: dict[str, int] = {
    "queued": 0,
    "chunking": 1,
    "embedding": 2,
    "writing": 3,
    "failed": 4,
    "done": 5,
    "deleted": 5,
    "unchanged": 5,
}

# KEYS: document keys. ARGV: versions (one per key, then) state, rank, error, updated_at, ttl,
# batch ('' keeps the recorded one), force ('1': same version, any rank — a replay), now (Unix
# seconds). A record written failed enters the failure indexes; one written otherwise leaves them.
# Names keys it is not given (the indexes): one Redis, not a cluster.
_SET = """
local n = #KEYS
local function index(key, failed, now)
    local doc = string.sub(key, 12)
    local user = redis.call('HGET', key, 'user_id')
    if failed then
        redis.call('HSET', key, 'failed_at', now)
        redis.call('ZADD', 'engram:failed', now, doc)
        redis.call('ZREMRANGEBYSCORE', 'engram:failed', '-inf', now - tonumber(ARGV[n + 5]))
        if user then
            redis.call('ZADD', 'engram:failed:t:' .. user, now, doc)
            redis.call('EXPIRE', 'engram:failed:t:' .. user, ARGV[n + 5])
        end
    else
        redis.call('ZREM', 'engram:failed', doc)
        if user then redis.call('ZREM', 'engram:failed:t:' .. user, doc) end
    end
end
for i = 1, n do
    local version = tonumber(ARGV[i])
    local current = redis.call('HMGET', KEYS[i], 'version', 'rank')
    local cv, cr = tonumber(current[1]), tonumber(current[2])
    local rank = tonumber(ARGV[n + 2])
    local force = ARGV[n + 7] == '1' and version == cv
    if force or cv == nil or version > cv or (version == cv and rank >= (cr or 0)) then
        if cv ~= nil and version > cv then redis.call('HDEL', KEYS[i], 'reused', 'embedded') end
        redis.call('HSET', KEYS[i], 'version', ARGV[i], 'state', ARGV[n + 1], 'rank', ARGV[n + 2],
                   'error', ARGV[n + 3], 'updated_at', ARGV[n + 4])
        if ARGV[n + 6] ~= '' then redis.call('HSET', KEYS[i], 'batch', ARGV[n + 6]) end
        redis.call('EXPIRE', KEYS[i], ARGV[n + 5])
        index(KEYS[i], ARGV[n + 1] == 'failed', ARGV[n + 8])
    end
end
return n
"""


# KEYS: document keys. ARGV: per key its version, chunks reused, chunks embedded (3 each). Kept
# only on a record of that very version: an older ingestion's counts never describe a newer one.
_COUNTS = """
for i = 1, #KEYS do
    local version = redis.call('HGET', KEYS[i], 'version')
    if version == ARGV[3 * i - 2] then
        redis.call('HSET', KEYS[i], 'reused', ARGV[3 * i - 1], 'embedded', ARGV[3 * i])
    end
end
return #KEYS
"""


# KEYS: document keys just named. ARGV: their tenants, then the ttl. A record that failed before
# it was named (a worker faster than its producer) enters its tenant's failure index now.
_NAMED = """
local n = #KEYS
for i = 1, n do
    local fields = redis.call('HMGET', KEYS[i], 'state', 'failed_at')
    if fields[1] == 'failed' and fields[2] then
        local index = 'engram:failed:t:' .. ARGV[i]
        redis.call('ZADD', index, fields[2], string.sub(KEYS[i], 12))
        redis.call('EXPIRE', index, ARGV[n + 1])
    end
end
return n
"""


# KEYS: document keys. Returns each key's state and version, two entries a key (false where the
# record has none): a wait over a load reads only these, in one call a page.
_STATES = """
local out = {}
for i, key in ipairs(KEYS) do
    local found = redis.call('HMGET', key, 'state', 'version')
    out[2 * i - 1] = found[1] or false
    out[2 * i] = found[2] or false
end
return out
"""
_STATES_PAGE = 1000

# ARGV: a SCAN cursor, the key pattern, the page size. Returns the next cursor, then state, count
# pairs of the page's records. Reads keys it is not given (a scan): one Redis, not a cluster.
_COUNT_PAGE = """
local found = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', ARGV[3])
local counts = {}
for _, key in ipairs(found[2]) do
    local state = redis.call('HGET', key, 'state')
    if state then counts[state] = (counts[state] or 0) + 1 end
end
local reply = {found[1]}
for state, count in pairs(counts) do
    reply[#reply + 1] = state
    reply[#reply + 1] = count
end
return reply
"""


@dataclass(frozen=True, slots=True)
class ProgressRecord:
    state: DocumentState
    version: int
    error: str | None
    updated_at: datetime
    batch: str | None = None
    """The staged batch the document was last in: what ``engram replay`` re-drives."""
    reused: int | None = None
    """Chunks of this version whose vector was reused from the stored version."""
    embedded: int | None = None
    """Chunks of this version the embedder embedded."""
    user_id: str | None = None
    """The tenant, as the producer named it (a record made before names were kept has none)."""
    document_id: str | None = None
    """The document's own id within its tenant (the key is a hash of both)."""


class Progress:
    def __init__(self, client: redis.Redis, ttl_s: int) -> None:
        self._redis = client
        self._ttl_s = ttl_s
        self._set = client.register_script(_SET)
        self._counts = client.register_script(_COUNTS)
        self._count_page = client.register_script(_COUNT_PAGE)
        self._named = client.register_script(_NAMED)
        self._states = client.register_script(_STATES)

    def set(
        self,
        documents: Iterable[tuple[str, int]],
        state: DocumentState,
        error: str | None = None,
        batch: str | None = None,
        force: bool = False,
    ) -> None:
        """Records ``state`` for each (document key, version), unless it would move it backwards;
        ``force`` moves a record of the same version back (a replay re-drives a failed one)."""
        pairs = list(documents)
        for start in range(0, len(pairs), 500):
            part = pairs[start : start + 500]
            args = [str(version) for _, version in part]
            args += [state, str(RANK[state]), error or "", utc_now().isoformat(), str(self._ttl_s)]
            args += [batch or "", "1" if force else "0", str(int(time.time()))]
            with translated_errors():
                self._set(keys=[_PREFIX + key for key, _ in part], args=args)

    def set_counts(self, counts: Iterable[tuple[str, int, int, int]]) -> None:
        """Records (document key, version, chunks reused, chunks embedded) on each record that is
        still about that version."""
        rows = list(counts)
        for start in range(0, len(rows), 500):
            part = rows[start : start + 500]
            args = [str(value) for _, *values in part for value in values]
            with translated_errors():
                self._counts(keys=[_PREFIX + key for key, *_ in part], args=args)

    def name(self, documents: Iterable[tuple[str, str, str, int]]) -> None:
        """Records (document key, tenant, document id, version): the names a record's key hides,
        and the document among the newest ingestions (every tenant's, and its tenant's), for the
        status page. A key's names never change (the key is a hash of them), so writing them
        again, in any order, is harmless."""
        rows = list(documents)
        if not rows:
            return
        with translated_errors():
            pipe = self._redis.pipeline(transaction=False)
            for key, user_id, document_id, version in rows:
                pipe.hset(_PREFIX + key, mapping={"user_id": user_id, "document_id": document_id})
                pipe.zadd(_RECENT, {key: version})
                pipe.zadd(f"{_RECENT}:{user_id}", {key: version})
            for user_id in {row[1] for row in rows}:
                pipe.zremrangebyrank(f"{_RECENT}:{user_id}", 0, -RECENT_KEPT_A_TENANT - 1)
                pipe.expire(f"{_RECENT}:{user_id}", self._ttl_s)
            pipe.zremrangebyrank(_RECENT, 0, -RECENT_KEPT - 1)
            pipe.execute()
            keys = [_PREFIX + key for key, *_ in rows]
            self._named(keys=keys, args=[user_id for _, user_id, *_ in rows] + [str(self._ttl_s)])

    def recent(self, user_id: str | None, limit: int = 50) -> list[ProgressRecord]:
        """The newest ingestions, newest first: a tenant's, or every tenant's (None). A record
        expired meanwhile is left out."""
        with translated_errors():
            found = cast(
                list[bytes],
                self._redis.zrevrange(_RECENT if user_id is None else f"{_RECENT}:{user_id}", 0, limit - 1),
            )
        return [record for record in self.records(raw.decode() for raw in found) if record is not None]

    def records(self, keys: Iterable[str]) -> list[ProgressRecord | None]:
        key_list = list(keys)
        with translated_errors():
            pipe = self._redis.pipeline(transaction=False)
            for key in key_list:
                pipe.hgetall(_PREFIX + key)
            raw = cast(list[dict[bytes, bytes]], pipe.execute())
        return [_record(fields) for fields in raw]

    def states(self, keys: Iterable[str]) -> list[tuple[str, int] | None]:
        """Each key's (state, version), or None without a record: what a wait over a load polls.
        Read inside Redis a page of keys a call, so the poller builds no record: over 90,000
        documents ~0.03 CPU-s a poll against ~0.8 for ``records`` (docs/bench/figures.md)."""
        key_list = [_PREFIX + key for key in keys]
        found: list[tuple[str, int] | None] = []
        for start in range(0, len(key_list), _STATES_PAGE):
            with translated_errors():
                reply = cast(list[bytes | None], self._states(keys=key_list[start : start + _STATES_PAGE]))
            for state, version in zip(reply[0::2], reply[1::2], strict=True):
                found.append(None if state is None else (state.decode(), int(version or 0)))
        return found

    def get(self, key: str) -> ProgressRecord | None:
        return self.records([key])[0]

    def failed(self, limit: int = 100_000) -> dict[str, ProgressRecord]:
        """Every document recorded failed (a scan: for replays, not for hot paths)."""
        found: dict[str, ProgressRecord] = {}
        with translated_errors():
            keys = [raw.decode() for raw in self._redis.scan_iter(match=_PREFIX + "*", count=1000)]
        for start in range(0, len(keys), 1000):
            part = [key.removeprefix(_PREFIX) for key in keys[start : start + 1000]]
            for key, record in zip(part, self.records(part), strict=True):
                if record is not None and record.state == "failed":
                    found[key] = record
                    if len(found) >= limit:
                        return found
        return found

    def failures(self, user_id: str | None, limit: int = 50) -> list[ProgressRecord]:
        """The newest failed documents, newest first: a tenant's, or every tenant's (None), read
        from the failure index a page at a time. Entries whose record expired or is no longer
        failed are dropped from the index as they are met."""
        self._index_earlier_failures()
        index = _FAILED if user_id is None else _FAILED_OF + user_id
        found: list[ProgressRecord] = []
        start, page = 0, max(limit, 50)
        with translated_errors():
            self._redis.zremrangebyscore(index, "-inf", time.time() - self._ttl_s)
        while len(found) < limit:
            with translated_errors():
                page_of = cast(list[bytes], self._redis.zrevrange(index, start, start + page - 1))
            keys = [raw.decode() for raw in page_of]
            if not keys:
                break
            stale = []
            for key, record in zip(keys, self.records(keys), strict=True):
                if record is None or record.state != "failed":
                    stale.append(key)
                elif user_id is None or record.user_id == user_id:
                    found.append(record)
            if stale:
                with translated_errors():
                    self._redis.zrem(index, *stale)
            start += page - len(stale)
        return found[:limit]

    def _index_earlier_failures(self) -> None:
        """Once per Redis: the failed records written before the index existed enter it (a scan)."""
        with translated_errors():
            if self._redis.exists(_FAILED_INDEXED):
                return
            earlier = self.failed()
            pipe = self._redis.pipeline(transaction=False)
            for key, record in earlier.items():
                moment = record.updated_at.timestamp()
                pipe.zadd(_FAILED, {key: moment})
                if record.user_id is not None:
                    pipe.zadd(_FAILED_OF + record.user_id, {key: moment})
                    pipe.expire(_FAILED_OF + record.user_id, self._ttl_s)
            pipe.set(_FAILED_INDEXED, 1)
            pipe.execute()

    def count_states(self, page: int = 1000) -> dict[str, int]:
        """How many documents are in each state: a scan, a page a call, each page counted inside
        Redis (a short script), so only the counts travel. For /metrics, which caches it."""
        counts: dict[str, int] = {}
        cursor = "0"
        with translated_errors():
            while True:
                reply = cast(list[bytes | int], self._count_page(args=[cursor, _PREFIX + "*", page]))
                cursor = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
                for state, count in zip(reply[1::2], reply[2::2], strict=True):
                    name = state.decode() if isinstance(state, bytes) else str(state)
                    counts[name] = counts.get(name, 0) + int(count)
                if cursor == "0":
                    return counts


def _record(raw: dict[bytes, bytes]) -> ProgressRecord | None:
    fields = {k.decode(): v.decode() for k, v in raw.items()}
    if "state" not in fields:
        return None
    return ProgressRecord(
        state=cast(DocumentState, fields["state"]),
        version=int(fields.get("version") or 0),
        error=fields.get("error") or None,
        updated_at=datetime.fromisoformat(fields["updated_at"]),
        batch=fields.get("batch") or None,
        reused=int(fields["reused"]) if "reused" in fields else None,
        embedded=int(fields["embedded"]) if "embedded" in fields else None,
        user_id=fields.get("user_id"),
        document_id=fields.get("document_id"),
    )
