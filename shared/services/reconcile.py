"""The reconciler: finishes what the dual-write could not, and finds drift both ways.

One pass:
1. the backlog — ``pending`` Memories past the grace period, ``failed`` ones whose retry is due,
   tombstones whose point may remain — synced in batches, oldest due first; a row that fails
   again is pushed back by its backoff, so it cannot hold the head of the queue;
2. Neo4j against Qdrant, page by page in id order: a ``synced`` Memory whose point is missing,
   or whose point holds another version, content hash or model, is synced again;
3. Qdrant against Neo4j, collection by collection (every model the store has held): a point
   with no Memory is deleted, guarded by the version it holds.
A dry run does the comparisons and repairs nothing. A pass stops at an outage (the next pass
tries again) and says so in ``error``.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta

from pydantic import BaseModel, Field

from shared.errors import EngramError
from shared.models import VectorSyncCounts
from shared.services.sync import Syncer
from shared.stores.base import GraphStore, MemoryState, VectorStores

log = logging.getLogger(__name__)


class Drift(BaseModel):
    missing_in_qdrant: int = 0
    stale_in_qdrant: int = 0
    orphan_points: int = 0


class ReconcileReport(BaseModel):
    dry_run: bool
    started_at: datetime
    finished_at: datetime | None = None
    backlog: int = Field(0, description="Memories and tombstones due for a sync when the pass began.")
    resynced: int = 0
    deleted: int = 0
    still_failed: int = 0
    drift_found: Drift = Field(default_factory=Drift)
    drift_fixed: Drift = Field(default_factory=Drift)
    error: str | None = None
    vector_sync: VectorSyncCounts | None = None


class Reconciler:
    def __init__(
        self,
        graph: GraphStore,
        vectors: VectorStores,
        syncer: Syncer,
        clock: Callable[[], datetime],
        grace_s: float,
        batch_size: int,
        scan_page: int,
    ) -> None:
        self._graph = graph
        self._vectors = vectors
        self._syncer = syncer
        self._clock = clock
        self._grace = timedelta(seconds=grace_s)
        self._batch = batch_size
        self._page = scan_page

    def run(self, dry_run: bool = False, scheduled: bool = False) -> ReconcileReport:
        """A scheduled pass retries failed rows whose backoff is over; one asked for on demand
        (``engram reconcile``) retries every failed row now."""
        now = self._clock()
        report = ReconcileReport(dry_run=dry_run, started_at=now)
        pending_before = now - self._grace
        due_by = now if scheduled else now + timedelta(days=36500)
        try:
            report.backlog = self._graph.backlog_size(pending_before, due_by)
            if not dry_run:
                self._drain_backlog(report, pending_before, due_by)
            if report.error is None:
                self._memories_against_points(report, pending_before, dry_run)
            if report.error is None:
                self._points_against_memories(report, dry_run)
        except EngramError as exc:
            log.warning("reconcile pass stopped: %s", exc)
            report.error = str(exc)
        report.finished_at = self._clock()
        try:
            report.vector_sync = self._graph.sync_health(report.finished_at).counts
            if not dry_run:
                self._graph.record_reconcile(report.model_dump_json(), report.finished_at)
        except EngramError as exc:
            report.error = report.error or str(exc)
        return report

    def _drain_backlog(self, report: ReconcileReport, pending_before: datetime, now: datetime) -> None:
        for _ in range(report.backlog // self._batch + 2):
            ids = self._graph.sync_backlog(pending_before, now, self._batch)
            if not ids:
                return
            outcome = self._syncer.sync(ids)
            report.resynced += outcome.synced
            report.deleted += outcome.deleted
            report.still_failed += outcome.failed
            if outcome.error and not outcome.permanent:
                report.error = outcome.error
                return

    def _memories_against_points(
        self, report: ReconcileReport, pending_before: datetime, dry_run: bool
    ) -> None:
        after: str | None = None
        while True:
            page = self._graph.memory_states(after, self._page)
            if not page:
                return
            after = page[-1].id
            by_model: dict[tuple[str, int], list[MemoryState]] = defaultdict(list)
            for state in page:
                if state.vector_sync == "synced" and state.embedding_model and state.embedding_dim:
                    by_model[(state.embedding_model, state.embedding_dim)].append(state)
            repair: list[str] = []
            newer: dict[tuple[str, int], dict[str, int]] = defaultdict(dict)
            for (model, dimension), states in by_model.items():
                points = self._vectors(model, dimension).states([s.id for s in states])
                for state in states:
                    point = points.get(state.id)
                    if point is None:
                        report.drift_found.missing_in_qdrant += 1
                        repair.append(state.id)
                    elif (point.version, point.content_hash, point.embedding_model) != (
                        state.version,
                        state.content_hash,
                        state.embedding_model,
                    ):
                        report.drift_found.stale_in_qdrant += 1
                        repair.append(state.id)
                        if (point.version or 0) > (state.version or 0):
                            # Newer than Neo4j (a restored backup): the guarded upsert would keep
                            # it, so it goes first. Neo4j is the truth.
                            newer[(model, dimension)][state.id] = point.version or 0
            if not dry_run:
                for (model, dimension), versions in newer.items():
                    self._vectors(model, dimension).delete(versions)
            if repair and not dry_run:
                outcome = self._syncer.sync(repair)
                fixed = outcome.synced
                missing = min(
                    fixed, report.drift_found.missing_in_qdrant - report.drift_fixed.missing_in_qdrant
                )
                report.drift_fixed.missing_in_qdrant += missing
                report.drift_fixed.stale_in_qdrant += fixed - missing
                if outcome.error and not outcome.permanent:
                    report.error = outcome.error
                    return

    def _points_against_memories(self, report: ReconcileReport, dry_run: bool) -> None:
        for model, dimension in self._graph.models():
            store = self._vectors(model, dimension)
            after: str | None = None
            while True:
                points, after = store.scroll(after, self._page)
                live = self._graph.live_versions([p.id for p in points])
                orphans = {p.id: p.version or 0 for p in points if p.id not in live}
                report.drift_found.orphan_points += len(orphans)
                if orphans and not dry_run:
                    store.delete(orphans)
                    report.drift_fixed.orphan_points += len(orphans)
                if after is None:
                    break
