"""What the backup held when last counted, kept in Redis: a primary lost is told at once.

Only the worker that owns an embedded Qdrant folder may open it, so ``engram status`` and
``/healthz`` cannot count its points themselves, and what the reconciler records of them lives in
Neo4j: gone with a wiped primary. So the owner writes a census here after each reconcile pass
and each restore (the collection, its points, the store id it was synced with), and status and
health compare it with what Neo4j holds now (``guard.judge``): 0 or few memories against the
points, or a store id the backup does not know, is a primary that looks lost, before any pass
after the loss has run.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Protocol

from shared.services.guard import judge

CENSUS_KEY = "engram:backup_census"


class Kv(Protocol):
    def get(self, name: str) -> Any: ...

    def set(self, name: str, value: str) -> Any: ...


@dataclass(frozen=True, slots=True)
class Census:
    collection: str
    points: int
    store_id: str | None
    counted_at: str


def save(redis: Kv, collection: str, points: int, store_id: str | None, at: datetime) -> None:
    redis.set(CENSUS_KEY, json.dumps(asdict(Census(collection, points, store_id, at.isoformat()))))


def load(redis: Kv) -> Census | None:
    raw = redis.get(CENSUS_KEY)
    if not raw:
        return None
    try:
        found = json.loads(raw)
        return Census(str(found["collection"]), int(found["points"]), found["store_id"], found["counted_at"])
    except (ValueError, KeyError, TypeError):
        return None


def looks_lost(census: Census | None, memories: int, store_id: str | None, min_share: float) -> str | None:
    """The primary against the last census: why it looks lost, or None (also with no census)."""
    if census is None:
        return None
    return judge(memories, store_id, census.points, census.store_id, min_share, census.collection)
