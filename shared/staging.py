"""Work in progress between the stages, kept in Redis so broker messages carry only batch ids.

A document's text crosses the broker once, in the ingest message. The chunk stage stages the
chunks; the embed stage adds the vectors slice by slice as float32 bytes, so an embed task that
is killed or runs out of time resumes where it stopped; the write stage reads both and drops the
batch once both stores have it. Staged batches expire after ``staging_ttl_s`` so an abandoned
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

    def put_vector_slice(self, batch_id: str, start: int, model: str, vectors: Vectors) -> None:
        """Vectors of chunks ``start`` .. ``start + len(vectors)`` of the batch, in chunk order."""
        raw = np.ascontiguousarray(vectors, dtype=np.float32).tobytes()
        header = json.dumps({"model": model, "rows": int(vectors.shape[0]), "dim": int(vectors.shape[1])})
        key = _key(batch_id, "vectors")
        with translated_errors():
            pipe = self._redis.pipeline(transaction=True)
            pipe.hset(key, mapping={f"{start}:data": raw, f"{start}:header": header})
            pipe.expire(key, self._ttl_s)
            pipe.execute()

    def vector_slices(self, batch_id: str) -> dict[int, tuple[str, Vectors]]:
        """The slices staged so far, by the index of their first chunk."""
        with translated_errors():
            fields = cast(dict[bytes, bytes], self._redis.hgetall(_key(batch_id, "vectors")))
        slices: dict[int, tuple[str, Vectors]] = {}
        for name, value in fields.items():
            start, part = name.decode().split(":")
            data = fields.get(f"{start}:data".encode())
            if part != "header" or data is None:
                continue
            meta = json.loads(value)
            array = np.frombuffer(data, dtype=np.float32).reshape(meta["rows"], meta["dim"])
            slices[int(start)] = (meta["model"], array)
        return slices

    def vectors(self, batch_id: str, chunks: int) -> tuple[str, Vectors] | None:
        """All ``chunks`` vectors of the batch in order, or None while any slice is missing."""
        slices = self.vector_slices(batch_id)
        parts: list[Vectors] = []
        models: set[str] = set()
        position = 0
        while position < chunks:
            found = slices.get(position)
            if found is None:
                return None
            models.add(found[0])
            parts.append(found[1])
            position += found[1].shape[0]
        if position != chunks or len(models) != 1:
            return None
        return models.pop(), np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)

    def exclude(self, batch_id: str, keys: list[str]) -> None:
        """Documents of the batch that failed alone (the embedder refused them): not written."""
        if not keys:
            return
        key = _key(batch_id, "excluded")
        with translated_errors():
            pipe = self._redis.pipeline(transaction=True)
            pipe.sadd(key, *keys)
            pipe.expire(key, self._ttl_s)
            pipe.execute()

    def excluded(self, batch_id: str) -> set[str]:
        with translated_errors():
            members = cast(set[bytes], self._redis.smembers(_key(batch_id, "excluded")))
        return {member.decode() for member in members}

    def finish(self, batch_id: str) -> None:
        """Drops the batch and remembers for a while that it was written, for redeliveries."""
        with translated_errors():
            pipe = self._redis.pipeline(transaction=True)
            pipe.set(_key(batch_id, "written"), "1", ex=self._ttl_s)
            pipe.delete(_key(batch_id, "documents"), _key(batch_id, "vectors"), _key(batch_id, "excluded"))
            pipe.execute()

    def is_finished(self, batch_id: str) -> bool:
        with translated_errors():
            return bool(self._redis.exists(_key(batch_id, "written")))
