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
            payload = {**memory.payload(), **row.extra}
            upserts[key].append(VectorPoint(memory.id, row.embedding, memory.version, payload))
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
            self._apply(upserts, deletes, written)
        except PermanentError as exc:
            # Qdrant refused the request: find the points it refuses, one by one, so those
            # fail alone and the rest of the batch is not held back with them.
            log.warning("qdrant refused a batch (%s); syncing its points one by one", exc)
            refused = self._apply_one_by_one(upserts, deletes, written)
            if refused:
                self._record_failure(refused, live_versions, deletes, outcome)
        except EngramError as exc:
            self._record_failure(
                {memory_id: exc for memory_id in _ids(live_versions, deletes)},
                live_versions,
                deletes,
                outcome,
            )
            return []
        failed = set(outcome.failed_ids)
        marked = set(self._graph.mark_synced({k: v for k, v in live_versions.items() if k not in failed}))
        tombstones = {t.id: t.version for t in rows.tombstones if t.id not in failed}
        self._graph.forget_tombstones(tombstones)
        outcome.synced += len(marked)
        outcome.deleted += sum(1 for v in deletes.values() for memory_id in v if memory_id not in failed)
        return [
            memory_id for memory_id in live_versions if memory_id not in marked and memory_id not in failed
        ]

    def _apply(
        self,
        upserts: dict[tuple[str, int], list[VectorPoint]],
        deletes: dict[tuple[str, int], dict[str, int]],
        written: dict[str, tuple[str, int, int]],
    ) -> None:
        for (model, dimension), points in upserts.items():
            self._vectors(model, dimension).upsert(points)
            for point in points:
                written[point.id] = (model, dimension, point.version)
        for (model, dimension), versions in deletes.items():
            self._vectors(model, dimension).delete(versions)

    def _apply_one_by_one(
        self,
        upserts: dict[tuple[str, int], list[VectorPoint]],
        deletes: dict[tuple[str, int], dict[str, int]],
        written: dict[str, tuple[str, int, int]],
    ) -> dict[str, EngramError]:
        """The ids Qdrant refuses, each with its error; an outage meanwhile fails the rest too."""
        refused: dict[str, EngramError] = {}
        Upserts = dict[tuple[str, int], list[VectorPoint]]
        Deletes = dict[tuple[str, int], dict[str, int]]
        singles: list[tuple[str, Upserts, Deletes]] = []
        for key, points in upserts.items():
            singles += [(point.id, {key: [point]}, {}) for point in points]
        for key, versions in deletes.items():
            singles += [
                (memory_id, {}, {key: {memory_id: version}}) for memory_id, version in versions.items()
            ]
        for memory_id, one_upsert, one_delete in singles:
            try:
                self._apply(one_upsert, one_delete, written)
            except EngramError as exc:
                refused[memory_id] = exc
        return refused

    def _record_failure(
        self,
        errors: dict[str, EngramError],
        live: dict[str, int],
        deletes: dict[tuple[str, int], dict[str, int]],
        outcome: SyncOutcome,
    ) -> None:
        versions = {memory_id: version for memory_id, version in live.items() if memory_id in errors}
        for tombstones in deletes.values():
            versions.update({k: v for k, v in tombstones.items() if k in errors})
        by_message: dict[str, dict[str, int]] = defaultdict(dict)
        for memory_id, version in versions.items():
            by_message[str(errors[memory_id])][memory_id] = version
        for message, group in by_message.items():
            log.warning("qdrant sync of %d memories failed: %s", len(group), message)
            self._graph.mark_failed(group, message, self._clock())
        last = next(iter(errors.values()))
        outcome.failed += len(versions)
        outcome.failed_ids += list(versions)
        outcome.error = str(last)
        outcome.permanent = all(isinstance(e, PermanentError) for e in errors.values())


def _ids(live: dict[str, int], deletes: dict[tuple[str, int], dict[str, int]]) -> list[str]:
    return list(live) + [memory_id for versions in deletes.values() for memory_id in versions]
