"""Work in progress between the stages, kept in Redis so broker messages carry only batch ids.

A document's text crosses the broker once, in the ingest message. The chunk stage stages the
chunks; the embed stage adds the vectors as float32 bytes; the write stage reads both and drops
the batch once both stores have it. Staged batches expire after ``staging_ttl_s`` so an abandoned
batch cannot fill Redis, but far later than any retry would reach them.
"""

from __future__ import annotations

import json
from typing import cast

import numpy as np
import redis

from shared.embedding.base import Vectors
from shared.models import StagedDocument
from shared.redis_client import translated_errors

_PREFIX = "engram:batch:"


def _key(batch_id: str, part: str) -> str:
    return f"{_PREFIX}{batch_id}:{part}"


class Staging:
    def __init__(self, client: redis.Redis, ttl_s: int) -> None:
        self._redis = client
        self._ttl_s = ttl_s

    def put_documents(self, batch_id: str, documents: list[StagedDocument]) -> None:
        payload = json.dumps([doc.model_dump(mode="json") for doc in documents])
        with translated_errors():
            self._redis.set(_key(batch_id, "documents"), payload, ex=self._ttl_s)

    def documents(self, batch_id: str) -> list[StagedDocument] | None:
        with translated_errors():
            raw = cast(bytes | None, self._redis.get(_key(batch_id, "documents")))
        if raw is None:
            return None
        return [StagedDocument.model_validate(doc) for doc in json.loads(raw)]

    def put_vectors(self, batch_id: str, model: str, vectors: Vectors) -> None:
        header = json.dumps({"model": model, "shape": list(vectors.shape)})
        with translated_errors():
            pipe = self._redis.pipeline(transaction=True)
            raw = np.ascontiguousarray(vectors, dtype=np.float32).tobytes()
            pipe.set(_key(batch_id, "vectors"), raw, ex=self._ttl_s)
            pipe.set(_key(batch_id, "vectors-header"), header, ex=self._ttl_s)
            pipe.execute()

    def vectors(self, batch_id: str) -> tuple[str, Vectors] | None:
        with translated_errors():
            found = self._redis.mget(_key(batch_id, "vectors"), _key(batch_id, "vectors-header"))
            raw, header = cast(list[bytes | None], found)
        if raw is None or header is None:
            return None
        meta = json.loads(header)
        array = np.frombuffer(raw, dtype=np.float32).reshape(meta["shape"])
        return meta["model"], array

    def finish(self, batch_id: str) -> None:
        """Drops the batch and remembers for a while that it was written, for redeliveries."""
        with translated_errors():
            pipe = self._redis.pipeline(transaction=True)
            pipe.set(_key(batch_id, "written"), "1", ex=self._ttl_s)
            pipe.delete(
                _key(batch_id, "documents"),
                _key(batch_id, "vectors"),
                _key(batch_id, "vectors-header"),
            )
            pipe.execute()

    def is_finished(self, batch_id: str) -> bool:
        with translated_errors():
            return bool(self._redis.exists(_key(batch_id, "written")))
