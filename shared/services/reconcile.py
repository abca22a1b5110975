"""The reconciler: finishes what the dual-write could not, and finds drift both ways.

One pass:
1. the backlog — ``pending`` Memories past the grace period, ``failed`` ones whose retry is due,
   tombstones whose point may remain — synced in batches, oldest due first; a row that fails
   again is pushed back by its backoff, so it cannot hold the head of the queue. Always whole;
2. Neo4j against Qdrant: a ``synced`` Memory whose point is missing, or whose point holds another
   version, content hash or model, is synced again;
3. Qdrant against Neo4j, in the collection of every model the store has held: a point with no
   Memory is deleted, guarded by the version it holds — but only when the primary is the one the
   collection was synced with (shared/services/guard.py; else the pass reports ``primary_lost``
   and deletes nothing), and, unless forced, when the points to delete are not a mass deletion
   (over ``ENGRAM_RECONCILE_MAX_DELETE_SHARE`` of the collection).
2 and 3 are one sweep of ranges of ids, each store read once per range (shared/services/drift.py).
A pass asked for on demand sweeps every id; a scheduled one at most ``ENGRAM_RECONCILE_SCAN_BUDGET``
Memories and points, from where the last one stopped (shared/services/sweep.py, which also says
how such a slice judges a mass deletion).
A dry run does the comparisons and repairs nothing. A pass stops at an outage (the next pass
tries again) and says so in ``error``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from pydantic import BaseModel, Field

from shared.errors import EngramError
from shared.models import VectorSyncCounts
from shared.services.drift import Drift, DriftSweep
from shared.services.guard import PrimaryGuard, Verdict
from shared.services.redeliver import Redelivered
from shared.services.sweep import SweepCursor, read_cursor
from shared.services.sync import Syncer
from shared.stores.base import GraphStore, VectorStores

log = logging.getLogger(__name__)

# Batches of the backlog read at once: the read's cost is the ordering of every due row.
BACKLOG_READ_BATCHES = 8


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
    primary_lost: str | None = Field(
        None, description="Why no point was deleted: the primary is not the store Qdrant was synced with."
    )
    mass_delete_refused: str | None = Field(
        None, description="Why the orphan points were kept: too large a share at once (--force)."
    )
    qdrant_points: dict[str, int] = Field(default_factory=dict, description="Points per collection.")
    neo4j_memories: int | None = None
    forced: bool = False
    vector_sync: VectorSyncCounts | None = None
    redelivered: int = Field(0, description="Stage messages the broker lost, sent again (shared/ledger.py).")
    redelivery_waiting: int = Field(
        0, description="Stage messages past their grace in a queue too long to read: judged once it drains."
    )
    redelivery_given_up: int = Field(
        0, description="Stage messages lost after every resend; their documents were recorded failed."
    )
    redelivery_error: str | None = Field(None, description="Why no lost message could be looked for.")
    scan_budget: int | None = Field(
        None, description="Memories, and points of each collection, this pass compared at most; None: all."
    )
    memories_compared: int = Field(0, description="Memories compared with their points by this pass.")
    points_compared: dict[str, int] = Field(
        default_factory=dict, description="Points compared with Neo4j by this pass, per collection."
    )
    sweep: SweepCursor | None = Field(
        None, description="Where the scheduled sweep got after this pass (a pass on demand sweeps all)."
    )


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
        guard: PrimaryGuard,
        max_delete_share: float = 0.2,
        mass_delete_min: int = 100,
        backup_models: Callable[[], list[tuple[str, int]]] | None = None,
        scan_budget: int | None = None,
        scroll_page: int | None = None,
    ) -> None:
        """``scan_budget``: the Memories, and points of each collection, a scheduled pass compares
        at most (None: all of them); ``scroll_page``: the points read ahead per scroll of Qdrant
        (``scan_page`` if None)."""
        self._graph = graph
        self._vectors = vectors
        self._syncer = syncer
        self._clock = clock
        self._grace = timedelta(seconds=grace_s)
        self._batch = batch_size
        self._guard = guard
        self._backup_models = backup_models
        self._budget = scan_budget
        self._sweep = DriftSweep(
            graph, vectors, syncer, scan_page, batch_size, max_delete_share, mass_delete_min, scroll_page
        )

    def run(
        self,
        dry_run: bool = False,
        scheduled: bool = False,
        force: bool = False,
        redeliver: Callable[[], Redelivered] | None = None,
    ) -> ReconcileReport:
        """A scheduled pass retries failed rows whose backoff is over, and sweeps a slice of the
        store from where the last one stopped; one asked for on demand (``engram reconcile``)
        retries every failed row now, and sweeps the whole store. ``force`` lets a mass deletion
        of orphan points through (never one on the word of a lost primary). ``redeliver`` first
        sends again the stage messages the broker lost (not on a dry run)."""
        now = self._clock()
        budget = self._budget if scheduled else None
        report = ReconcileReport(dry_run=dry_run, started_at=now, forced=force, scan_budget=budget)
        if redeliver is not None and not dry_run:
            try:
                redelivered = redeliver()
                report.redelivered, report.redelivery_waiting = redelivered.resent, redelivered.waiting
                report.redelivery_given_up = redelivered.given_up
            except EngramError as exc:
                log.warning("redelivery stopped: %s", exc)
                report.redelivery_error = str(exc)  # the stores' repairs go on without Redis
        pending_before = now - self._grace
        due_by = now if scheduled else now + timedelta(days=36500)
        cursor = SweepCursor()
        try:
            if budget is not None:
                cursor = read_cursor(self._graph.sweep_cursor())
            report.backlog = self._graph.backlog_size(pending_before, due_by)
            if not dry_run:
                self._drain_backlog(report, pending_before, due_by)
            verdicts = self._check_primary(report, dry_run) if report.error is None else {}
            if report.error is None:
                cursor = self._drift(report, cursor, budget, verdicts, dry_run, force)
        except EngramError as exc:
            log.warning("reconcile pass stopped: %s", exc)
            report.error = str(exc)
        report.finished_at = self._clock()
        if budget is not None:
            report.sweep = cursor
        try:
            report.vector_sync = self._graph.sync_health(report.finished_at).counts
            if not dry_run:
                if budget is not None:
                    self._graph.save_sweep_cursor(cursor.model_dump_json(), report.finished_at)
                self._graph.record_reconcile(report.model_dump_json(), report.finished_at)
                if report.error is None:
                    points = sum(report.qdrant_points.values()) if report.qdrant_points else None
                    self._guard.record(report.primary_lost, points)
        except EngramError as exc:
            report.error = report.error or str(exc)
        return report

    def _drain_backlog(self, report: ReconcileReport, pending_before: datetime, now: datetime) -> None:
        # Each read of the backlog orders every due row, so it is read a page of several batches
        # at a time: at 100k with 10,000 failed, one read per batch was 10 of a repair's 38 s.
        page = self._batch * BACKLOG_READ_BATCHES
        for _ in range(report.backlog // page + 2):
            ids = self._graph.sync_backlog(pending_before, now, page)
            if not ids:
                return
            for start in range(0, len(ids), self._batch):
                outcome = self._syncer.sync(ids[start : start + self._batch])
                report.resynced += outcome.synced
                report.deleted += outcome.deleted
                report.still_failed += outcome.failed
                if outcome.error and not outcome.permanent:
                    report.error = outcome.error
                    return

    def _check_primary(self, report: ReconcileReport, dry_run: bool) -> dict[str, Verdict]:
        """The guard's verdict on each collection, before anything is repaired."""
        verdicts: dict[str, Verdict] = {}
        # The backup's collections too: a wiped primary knows of no model at all.
        backup = self._backup_models() if self._backup_models is not None else []
        for model, dimension in sorted({*self._graph.models(), *backup}):
            store = self._vectors(model, dimension)
            verdict = self._guard.check(store, stamp=not dry_run)
            verdicts[store.collection] = verdict
            report.qdrant_points[store.collection] = verdict.points
            report.neo4j_memories = verdict.memories
            if verdict.lost is not None:
                log.error("reconcile: %s", verdict.lost)
                report.primary_lost = verdict.lost
        return verdicts

    def _drift(
        self,
        report: ReconcileReport,
        cursor: SweepCursor,
        budget: int | None,
        verdicts: dict[str, Verdict],
        dry_run: bool,
        force: bool,
    ) -> SweepCursor:
        swept = self._sweep.run(cursor, budget, verdicts, report.primary_lost is not None, dry_run, force)
        report.drift_found, report.drift_fixed = swept.found, swept.fixed
        report.memories_compared, report.points_compared = swept.memories_compared, swept.points_compared
        report.mass_delete_refused = swept.mass_delete_refused
        report.error = swept.error
        return swept.cursor
