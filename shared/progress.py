"""Where each document is in the pipeline, kept in Redis for the status endpoint.

Neo4j says what is stored; this says what is still on its way (queued, chunking, ...) or why it
failed, which Neo4j cannot know.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import cast

import redis

from shared.models import DocumentState, utc_now
from shared.redis_client import translated_errors

_PREFIX = "engram:doc:"


class Progress:
    def __init__(self, client: redis.Redis, ttl_s: int) -> None:
        self._redis = client
        self._ttl_s = ttl_s

    def set(self, keys: Iterable[str], state: DocumentState, error: str | None = None) -> None:
        fields = {"state": state, "error": error or "", "updated_at": utc_now().isoformat()}
        with translated_errors():
            pipe = self._redis.pipeline(transaction=False)
            for key in keys:
                pipe.hset(_PREFIX + key, mapping=fields)
                pipe.expire(_PREFIX + key, self._ttl_s)
            pipe.execute()

    def states(self, keys: Iterable[str]) -> list[str]:
        """The state of each document, ``unknown`` where none is recorded."""
        key_list = list(keys)
        with translated_errors():
            pipe = self._redis.pipeline(transaction=False)
            for key in key_list:
                pipe.hget(_PREFIX + key, "state")
            raw = pipe.execute()
        return [value.decode() if value else "unknown" for value in raw]

    def get(self, key: str) -> tuple[DocumentState, str | None, datetime] | None:
        with translated_errors():
            raw = cast(dict[bytes, bytes], self._redis.hgetall(_PREFIX + key))
        if not raw:
            return None
        fields = {k.decode(): v.decode() for k, v in raw.items()}
        state = cast(DocumentState, fields["state"])
        return state, fields.get("error") or None, datetime.fromisoformat(fields["updated_at"])
