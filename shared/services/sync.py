"""Bringing Qdrant level with Neo4j for some Memory ids, and recording how far that got.

The sync never trusts a caller's copy of a Memory: it reads back what Neo4j holds now for each id
(a live Memory with its vector and version, or a tombstone), writes that to Qdrant guarded by
the version, and marks ``synced`` only the Memories still at the version it wrote. So a sync of
version 1 racing a write of version 2 can neither leave version 1 in Qdrant (the guarded upsert
is a no-op on a newer point) nor mark version 2 synced. A Memory deleted while its point was
being written is looked at again and its point deleted. A Qdrant failure never undoes the Neo4j
write: the Memories are recorded ``failed`` with the error, and the reconciler retries them
after a backoff that grows with their attempts.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from shared.errors import EngramError, PermanentError
from shared.stores.base import GraphStore, VectorPoint, VectorStores

log = logging.getLogger(__name__)

ROUNDS = 3


@dataclass(slots=True)
class SyncOutcome:
    synced: int = 0
    deleted: int = 0
    failed: int = 0
    superseded: int = 0
    """Ids that moved on (a newer version or a delete) while being synced; their writer syncs them."""
    error: str | None = None
    permanent: bool = False
    failed_ids: list[str] = field(default_factory=list)

    def add(self, other: SyncOutcome) -> None:
        self.synced += other.synced
        self.deleted += other.deleted
        self.failed += other.failed
        self.superseded += other.superseded
        self.failed_ids += other.failed_ids
        if other.error:
            self.error, self.permanent = other.error, other.permanent


class Syncer:
    def __init__(self, graph: GraphStore, vectors: VectorStores, clock: Callable[[], datetime]) -> None:
        self._graph = graph
        self._vectors = vectors
        self._clock = clock

    def sync(self, ids: Sequence[str]) -> SyncOutcome:
        outcome = SyncOutcome()
        remaining = list(dict.fromkeys(ids))
        written: dict[str, tuple[str, int, int]] = {}  # id -> (model, dimension, version) upserted
        for _ in range(ROUNDS):
            if not remaining:
                break
            remaining = self._round(remaining, written, outcome)
            if outcome.error:
                break
        outcome.superseded += len(remaining) if not outcome.error else 0
        return outcome

    def _round(
        self, ids: list[str], written: dict[str, tuple[str, int, int]], outcome: SyncOutcome
    ) -> list[str]:
        """One read-back and write; returns the ids to look at again."""
        rows = self._graph.sync_rows(ids)
        upserts: dict[tuple[str, int], list[VectorPoint]] = defaultdict(list)
        deletes: dict[tuple[str, int], dict[str, int]] = defaultdict(dict)
        for row in rows.live:
            memory = row.memory
            key = (memory.embedding_model, memory.embedding_dim)
            upserts[key].append(VectorPoint(memory.id, row.embedding, memory.version, memory.payload()))
        for tombstone in rows.tombstones:
            model, dimension = tombstone.embedding_model, tombstone.embedding_dim
            if model is None or dimension is None:
                stored = self._graph.stored_model()
                if stored is None:
                    continue
                model, dimension = stored
            deletes[(model, dimension)][tombstone.id] = tombstone.version
        seen = {row.memory.id for row in rows.live} | {t.id for t in rows.tombstones}
        for memory_id in ids:
            if memory_id not in seen and memory_id in written:
                # Gone from Neo4j without a tombstone after we wrote its point: take ours back.
                model, dimension, version = written[memory_id]
                deletes[(model, dimension)][memory_id] = version

        live_versions = {row.memory.id: row.memory.version for row in rows.live}
        try:
            for (model, dimension), points in upserts.items():
                self._vectors(model, dimension).upsert(points)
                for point in points:
                    written[point.id] = (model, dimension, point.version)
            for (model, dimension), versions in deletes.items():
                self._vectors(model, dimension).delete(versions)
        except EngramError as exc:
            self._record_failure(exc, live_versions, deletes, outcome)
            return []
        marked = set(self._graph.mark_synced(live_versions))
        tombstones = {t.id: t.version for t in rows.tombstones}
        self._graph.forget_tombstones(tombstones)
        outcome.synced += len(marked)
        outcome.deleted += sum(len(v) for v in deletes.values())
        return [memory_id for memory_id in live_versions if memory_id not in marked]

    def _record_failure(
        self,
        exc: EngramError,
        live: dict[str, int],
        deletes: dict[tuple[str, int], dict[str, int]],
        outcome: SyncOutcome,
    ) -> None:
        versions = dict(live)
        for tombstones in deletes.values():
            versions.update(tombstones)
        log.warning("qdrant sync of %d memories failed: %s", len(versions), exc)
        self._graph.mark_failed(versions, str(exc), self._clock())
        outcome.failed += len(versions)
        outcome.failed_ids += list(versions)
        outcome.error = str(exc)
        outcome.permanent = isinstance(exc, PermanentError)
