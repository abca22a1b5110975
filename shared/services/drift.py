"""The drift sweep: Neo4j and Qdrant compared both ways, one range of ids at a time.

A step reads a page of Memories from Neo4j in id order after the cursor
(``ENGRAM_RECONCILE_SCAN_PAGE``), and takes each collection's points of the same ids from a scroll
read ahead (``ENGRAM_RECONCILE_SCROLL_PAGE``: Qdrant's scroll is in id order too, both order ids as
strings, and Engram's ids are lowercase uuids); the range is what both cover. Over it:

* a ``synced`` Memory whose point is missing, or holds another version, content hash or model,
  is synced again (a point newer than Neo4j, after a restore, is deleted first: Neo4j is the
  truth). Such a point is read again by id after the page before it counts: the sync marks a
  Memory ``synced`` only after its point is written, so Qdrant must be read after Neo4j;
* a point with no Memory in the page is an orphan once Neo4j, asked again after the point was
  read, holds no such Memory: a point written with its Memory meanwhile is never taken for one.
  Orphans are deleted guarded by the version they held, and judged as a mass deletion first
  (sweep.py).

So each Memory and each point is read once per sweep, by range reads of each store, and only what
would be repaired is read again by id (an id the two stores ordered otherwise too: compared, not
repaired). Embedded Qdrant's local mode sorts every point id on each scroll, whatever its limit,
so the points are read far ahead of the ranges.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field

from pydantic import BaseModel

from shared.models import PointState
from shared.services.guard import Verdict
from shared.services.sweep import CollectionRound, SweepCursor
from shared.services.sync import Syncer
from shared.stores.base import GraphStore, MemoryState, VectorStore, VectorStores

log = logging.getLogger(__name__)


class Drift(BaseModel):
    missing_in_qdrant: int = 0
    stale_in_qdrant: int = 0
    orphan_points: int = 0


@dataclass(slots=True)
class SweepOutcome:
    """What one pass's sweep found and did, and where the next pass starts."""

    cursor: SweepCursor
    found: Drift = field(default_factory=Drift)
    fixed: Drift = field(default_factory=Drift)
    memories_compared: int = 0
    points_compared: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    mass_delete_refused: str | None = None


@dataclass(frozen=True, slots=True)
class Step:
    """One range of ids, (after, end], as both stores hold it."""

    memories: list[MemoryState]
    points: dict[str, list[PointState]]
    end: str | None
    """The last id of the range; None: the range runs to the last id of both stores."""


class _ReadAhead:
    """One collection's points after the sweep's cursor, read ahead of the ranges in scrolls of
    ``read`` and taken range by range: a scroll of embedded Qdrant's local mode sorts every point
    id (qdrant_client's ``LocalCollection._scroll_by_id``), whatever its limit. Points read ahead
    are older than a later range's page of Memories: the sweep reads again by id what it would
    repair (``_compare``), and asks Neo4j about an orphan after its point was read."""

    def __init__(self, store: VectorStore, after: str | None, read: int) -> None:
        self._store = store
        self._after = after
        self._offset = after  # Qdrant's offset: the first id of the next scroll, inclusive
        self._read = read
        self._held: list[PointState] = []
        self._first = 0
        self._more = True

    def next(self, limit: int) -> tuple[list[PointState], str | None]:
        """The next ``limit`` points at most, and the id up to which they are all the store holds
        (None: they are all there is)."""
        while len(self._held) - self._first <= limit and self._more:
            page, self._offset = self._store.scroll(self._offset, max(self._read, limit) + 1)
            self._held = self._held[self._first :] + [
                p for p in page if self._after is None or p.id > self._after
            ]
            self._first = 0
            self._more = self._offset is not None
        points = self._held[self._first : self._first + limit]
        bounded = self._more or len(self._held) - self._first > limit
        return points, points[-1].id if points and bounded else None

    def drop_through(self, end: str | None) -> None:
        """Forgets the points up to ``end`` (None: all of them), compared by the range."""
        while self._first < len(self._held) and (end is None or self._held[self._first].id <= end):
            self._first += 1


class DriftSweep:
    def __init__(
        self,
        graph: GraphStore,
        vectors: VectorStores,
        syncer: Syncer,
        page: int,
        batch: int,
        max_delete_share: float,
        mass_delete_min: int,
        read_ahead: int | None = None,
    ) -> None:
        self._graph = graph
        self._vectors = vectors
        self._syncer = syncer
        self._page = page
        self._read_ahead = read_ahead or page
        self._batch = batch
        self._max_delete_share = max_delete_share
        self._mass_delete_min = mass_delete_min

    def run(
        self,
        cursor: SweepCursor,
        budget: int | None,
        verdicts: dict[str, Verdict],
        primary_lost: bool,
        dry_run: bool,
        force: bool,
    ) -> SweepOutcome:
        """From the cursor on, up to ``budget`` Memories and points of each collection (None: to
        the last id). A pass that meets an outage leaves the cursor where it was."""
        outcome = SweepOutcome(cursor=cursor)
        stores = {s.collection: s for s in (self._vectors(m, d) for m, d in self._graph.models())}
        read = self._read_ahead if budget is None else min(self._read_ahead, budget)
        ahead = {name: _ReadAhead(store, cursor.after, read) for name, store in stores.items()}
        orphans: dict[str, dict[str, int]] = {name: {} for name in stores}
        outcome.points_compared = dict.fromkeys(stores, 0)
        after = cursor.after
        while True:
            used = max([outcome.memories_compared, *outcome.points_compared.values()])
            if budget is not None and used >= budget:
                break
            limit = self._page if budget is None else min(self._page, budget - used)
            step = self._step(after, limit, ahead)
            if not self._compare(step, stores, outcome, primary_lost, dry_run):
                return SweepOutcome(
                    cursor=cursor, found=outcome.found, fixed=outcome.fixed, error=outcome.error
                )
            outcome.memories_compared += len(step.memories)
            for name, points in step.points.items():
                outcome.points_compared[name] += len(points)
                orphans[name].update(self._orphans(step.memories, points))
            after = step.end
            if after is None:
                break
        rounds: dict[str, CollectionRound] = {}
        for name, store in stores.items():
            found = orphans[name]
            outcome.found.orphan_points += len(found)
            rounds[name] = cursor.collection(name).plus(outcome.points_compared[name], len(found))
            if found and not dry_run and not primary_lost:
                verdict = verdicts.get(name) or Verdict(None, store.count(), 0)
                self._delete_orphans(
                    store, found, rounds[name], verdict.points, after is None, force, outcome
                )
        outcome.cursor = cursor.advanced(after, outcome.memories_compared, rounds)
        return outcome

    def _step(self, after: str | None, limit: int, ahead: dict[str, _ReadAhead]) -> Step:
        """The Memories after ``after`` from Neo4j, and each collection's points after it: the range
        ends where the first of them stops short."""
        # One more than the limit: whether there is more after it.
        memories = self._graph.memory_states(after, limit + 1)
        end: str | None = None
        if len(memories) > limit:
            memories = memories[:limit]
            end = memories[-1].id
        taken: dict[str, list[PointState]] = {}
        for name, points in ahead.items():
            taken[name], bound = points.next(limit)
            if bound is not None:
                end = bound if end is None else min(end, bound)
        if end is not None:
            memories = [m for m in memories if m.id <= end]
            taken = {name: [p for p in points if p.id <= end] for name, points in taken.items()}
        for points in ahead.values():
            points.drop_through(end)
        return Step(memories, taken, end)

    def _compare(
        self,
        step: Step,
        stores: dict[str, VectorStore],
        outcome: SweepOutcome,
        primary_lost: bool,
        dry_run: bool,
    ) -> bool:
        """The step's Memories against their points, repaired; False when a repair met an outage."""
        held = {name: {p.id: p for p in points} for name, points in step.points.items()}
        repair: list[str] = []
        newer: dict[tuple[str, int], dict[str, int]] = defaultdict(dict)
        for (model, dimension), states in _synced_by_model(step.memories).items():
            store = self._vectors(model, dimension)
            points = held.get(store.collection, {})
            # A point that differs, or that the range's read did not hold (read ahead of this
            # page, of a collection no model names, an id ordered otherwise), is read again by id,
            # after the page, before it counts: the sync marks a Memory synced after its write.
            suspects = [s for s in states if _differs(points.get(s.id), s)]
            fresh = store.states([s.id for s in suspects]) if suspects else {}
            for state in suspects:
                point = fresh.get(state.id)
                if point is None:
                    outcome.found.missing_in_qdrant += 1
                    repair.append(state.id)
                elif _differs(point, state):
                    outcome.found.stale_in_qdrant += 1
                    repair.append(state.id)
                    if (point.version or 0) > (state.version or 0):
                        # Newer than Neo4j (a restored backup): the guarded upsert would keep
                        # it, so it goes first. Neo4j is the truth.
                        newer[(model, dimension)][state.id] = point.version or 0
        if dry_run:
            return True
        if not primary_lost:
            for (model, dimension), versions in newer.items():
                self._vectors(model, dimension).delete(versions)
        for start in range(0, len(repair), self._batch):
            synced = self._syncer.sync(repair[start : start + self._batch])
            missing = min(synced.synced, outcome.found.missing_in_qdrant - outcome.fixed.missing_in_qdrant)
            outcome.fixed.missing_in_qdrant += missing
            outcome.fixed.stale_in_qdrant += synced.synced - missing
            if synced.error and not synced.permanent:
                outcome.error = synced.error
                return False
        return True

    def _orphans(self, memories: list[MemoryState], points: list[PointState]) -> dict[str, int]:
        """The points of a range with no Memory, each with the version it held. Neo4j is asked
        again for those its page did not hold: after the scroll, so a point written with its
        Memory meanwhile is not one."""
        in_page = {m.id for m in memories}
        unknown = [p for p in points if p.id not in in_page]
        found: dict[str, int] = {}
        for start in range(0, len(unknown), self._page):
            chunk = unknown[start : start + self._page]
            live = self._graph.live_versions([p.id for p in chunk])
            found.update({p.id: p.version or 0 for p in chunk if p.id not in live})
        return found

    def _delete_orphans(
        self,
        store: VectorStore,
        orphans: dict[str, int],
        this_round: CollectionRound,
        points: int,
        complete: bool,
        force: bool,
        outcome: SweepOutcome,
    ) -> None:
        # Judged against the whole collection, not this pass's slice (shared/services/sweep.py):
        # the round's orphans so far, or, until the round has compared every point, as many as
        # its rate so far predicts over the whole collection.
        judged = this_round.judged_orphans(points, complete)
        limit = max(self._mass_delete_min, int(self._max_delete_share * points))
        if judged > limit and not force:
            outcome.mass_delete_refused = _refusal(
                store.collection, len(orphans), this_round, judged, limit, points
            )
            log.error("reconcile: %s", outcome.mass_delete_refused)
            return
        ids = list(orphans)
        for start in range(0, len(ids), self._page):
            store.delete({i: orphans[i] for i in ids[start : start + self._page]})
        outcome.fixed.orphan_points += len(orphans)


def _differs(point: PointState | None, state: MemoryState) -> bool:
    return point is None or (point.version, point.content_hash, point.embedding_model) != (
        state.version,
        state.content_hash,
        state.embedding_model,
    )


def _synced_by_model(memories: list[MemoryState]) -> dict[tuple[str, int], list[MemoryState]]:
    by_model: dict[tuple[str, int], list[MemoryState]] = defaultdict(list)
    for state in memories:
        if state.vector_sync == "synced" and state.embedding_model and state.embedding_dim:
            by_model[(state.embedding_model, state.embedding_dim)].append(state)
    return by_model


def _refusal(
    collection: str, found: int, round_: CollectionRound, judged: int, limit: int, points: int
) -> str:
    if found == round_.orphans == judged:
        head = f"{judged} of {points} points of {collection} have no Memory"
    else:
        head = (
            f"{found} points of {collection} have no Memory in this pass's slice, {round_.orphans} in "
            f"the {round_.compared} points its sweep compared this round: about {judged} of {points}"
        )
    return f"{head}: more than {limit} at once is a mass deletion; `engram reconcile --force` deletes them"
