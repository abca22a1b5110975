"""The Reconciler over fakes: the backlog, and drift found and repaired both ways."""

from __future__ import annotations

from collections.abc import Sequence

from shared.errors import ServiceUnavailable
from shared.models import PointState
from shared.services.redeliver import Redelivered
from shared.services.sync import SyncOutcome
from tests.unit.fakes import DIM, MODEL, staged
from tests.unit.reconcile_fakes import GRACE_S, GRACE_S_DELTA, Stores


def _drifted() -> tuple[Stores, dict[str, str]]:
    """Both stores drifted every way: an orphan point, a synced Memory whose point was lost, one
    whose point holds an older version, and one whose point holds another content hash."""
    stores = Stores()
    (lost,) = stores.write(staged("lost", 1, ["lost point"]))
    (old,) = stores.write(staged("old", 2, ["old point"]))
    (edited,) = stores.write(staged("edited", 1, ["edited point"]))
    (fine,) = stores.write(staged("fine", 1, ["fine"]))
    del stores.vectors.points[lost]
    stores.vectors.put_raw(old, 1, content_hash="whatever", embedding_model=MODEL)
    held = stores.vectors.points[edited]
    stores.vectors.put_raw(edited, held.version, content_hash="other", embedding_model=MODEL)
    stores.vectors.put_raw("orphan", 7, content_hash="x", embedding_model=MODEL)
    stores.vectors.put_raw("orphan-unversioned", None)
    stores.clock.advance(GRACE_S + 1)
    return stores, {"lost": lost, "old": old, "edited": edited, "fine": fine}


def test_drift_both_ways_is_found_and_repaired() -> None:
    # Given stores drifted both ways
    stores, ids = _drifted()

    # When a pass runs
    report = stores.run()

    # Then every drift is found and fixed
    assert report.error is None
    assert report.drift_found.model_dump() == {
        "missing_in_qdrant": 1,
        "stale_in_qdrant": 2,
        "orphan_points": 2,
    }
    assert report.drift_fixed == report.drift_found
    # orphans are gone, the lost point is back, the stale ones hold Neo4j's version and hash
    assert sorted(stores.vectors.points) == sorted(ids.values())
    for memory_id in ids.values():
        stored = stores.graph.memories[memory_id].memory
        point = stores.vectors.points[memory_id]
        assert point.version == stored.version
        assert point.payload["content_hash"] == stored.content_hash
        assert stores.graph.memories[memory_id].vector_sync == "synced"


def test_a_second_pass_finds_no_drift() -> None:
    stores, _ = _drifted()
    stores.run()

    again = stores.run()

    assert again.drift_found.model_dump() == {
        "missing_in_qdrant": 0,
        "stale_in_qdrant": 0,
        "orphan_points": 0,
    }
    assert (again.backlog, again.resynced) == (0, 0)


def test_dry_run_repairs_nothing_but_reports_the_same_counts() -> None:
    # Given two stores drifted alike
    dry_stores, _ = _drifted()
    real_stores, _ = _drifted()
    before = dict(dry_stores.vectors.points)

    # When one is reconciled dry and the other for real
    dry = dry_stores.run(dry_run=True)
    real = real_stores.run()

    # Then the dry run found the same drift, fixed none, and changed nothing
    assert dry.drift_found == real.drift_found
    assert dry.drift_fixed.model_dump() == {"missing_in_qdrant": 0, "stale_in_qdrant": 0, "orphan_points": 0}
    assert dry.backlog == real.backlog
    assert dry_stores.vectors.points == before
    assert dry_stores.graph.reconcile is None  # a dry run is not recorded as the last pass
    assert real_stores.graph.reconcile is not None


def test_dry_run_counts_the_backlog_without_syncing_it() -> None:
    stores = Stores()
    ids = stores.write(staged("d", 1, ["one", "two"]), sync=False)
    stores.clock.advance(GRACE_S + 1)

    report = stores.run(dry_run=True)

    assert (report.backlog, report.resynced) == (2, 0)
    assert {stores.graph.memories[i].vector_sync for i in ids} == {"pending"}
    assert stores.vectors.points == {}


def test_pending_memories_within_the_grace_period_are_left_to_their_writer() -> None:
    stores = Stores()
    stores.write(staged("d", 1, ["one"]), sync=False)
    stores.clock.advance(GRACE_S - 1)

    report = stores.run()

    assert (report.backlog, report.resynced) == (0, 0)
    assert stores.vectors.points == {}


def test_a_failing_row_does_not_block_the_head_of_the_backlog() -> None:
    # Given a backlog whose oldest row Qdrant refuses, synced one row per call
    stores = Stores(batch_size=1)
    (bad,) = stores.write(staged("bad", 1, ["refused"]), sync=False)
    stores.clock.advance(1)
    good = stores.write(staged("good", 1, ["one", "two"]), sync=False)
    stores.clock.advance(GRACE_S + 1)
    stores.vectors.reject_ids = {bad}
    assert stores.graph.sync_backlog(stores.clock() - GRACE_S_DELTA, stores.clock(), 1) == [bad]

    # When a pass runs
    report = stores.run()

    # Then the rows behind it are synced, and it is failed with its retry later
    assert (report.backlog, report.resynced, report.still_failed) == (3, 2, 1)
    assert report.error is None
    assert {stores.graph.memories[i].vector_sync for i in good} == {"synced"}
    failed = stores.graph.memories[bad]
    assert failed.vector_sync == "failed"
    assert failed.retry_at is not None and failed.retry_at > stores.clock()
    # and it is no longer due, so the next pass does not start with it
    assert stores.graph.sync_backlog(stores.clock() - GRACE_S_DELTA, stores.clock(), 10) == []


def test_the_backlog_is_read_a_page_of_batches_at_a_time_and_synced_a_batch_at_a_time() -> None:
    # Given a backlog of 20 Memories, synced two per call (so a page is 16)
    stores = Stores(batch_size=2)
    for n in range(20):
        stores.write(staged(f"d{n}", 1, [f"text {n}"]), sync=False)
    stores.clock.advance(GRACE_S + 1)
    reads: list[int] = []
    synced: list[int] = []
    read, sync = stores.graph.sync_backlog, stores.syncer.sync
    stores.graph.sync_backlog = lambda *args: reads.append(args[-1]) or read(*args)  # type: ignore[method-assign]
    stores.syncer.sync = lambda ids: synced.append(len(ids)) or sync(ids)  # type: ignore[method-assign]

    # When a pass runs
    report = stores.run()

    # Then every row is synced, in calls of at most a batch, from three reads of the backlog
    # (16, the 4 left, none) where one read per batch took eleven
    assert (report.backlog, report.resynced, report.error) == (20, 20, None)
    assert reads == [16, 16, 16]
    assert synced == [2] * 10
    assert {m.vector_sync for m in stores.graph.memories.values()} == {"synced"}


def test_an_outage_in_the_middle_of_a_page_stops_the_pass_there() -> None:
    stores = Stores(batch_size=2)
    for n in range(6):
        stores.write(staged(f"d{n}", 1, [f"text {n}"]), sync=False)
    stores.clock.advance(GRACE_S + 1)
    sync = stores.syncer.sync
    calls: list[int] = []

    def down_after_first(ids: Sequence[str]) -> SyncOutcome:
        calls.append(len(ids))
        if len(calls) == 2:
            stores.vectors.fail_with = ServiceUnavailable("qdrant", "connection refused")
        return sync(ids)

    stores.syncer.sync = down_after_first  # type: ignore[method-assign]

    report = stores.run()

    assert report.error is not None and "qdrant" in report.error
    assert (report.resynced, report.still_failed, calls) == (2, 2, [2, 2])
    states = [m.vector_sync for m in stores.graph.memories.values()]
    assert (states.count("synced"), states.count("failed"), states.count("pending")) == (2, 2, 2)


def test_backlog_order_is_oldest_due_first_with_retries_behind() -> None:
    stores = Stores()
    (first,) = stores.write(staged("first", 1, ["a"]), sync=False)
    stores.clock.advance(5)
    (second,) = stores.write(staged("second", 1, ["b"]), sync=False)
    stores.graph.mark_failed({first: 1}, "boom", stores.clock())  # due 10 s from now
    stores.clock.advance(GRACE_S + 30)

    order = stores.graph.sync_backlog(stores.clock() - GRACE_S_DELTA, stores.clock(), 10)

    assert order == [second, first]


def test_qdrant_down_stops_the_pass_and_says_so() -> None:
    stores = Stores()
    ids = stores.write(staged("d", 1, ["one"]), sync=False)
    stores.clock.advance(GRACE_S + 1)
    stores.vectors.fail_with = ServiceUnavailable("qdrant", "connection refused")

    report = stores.run()

    assert report.error is not None and "qdrant" in report.error
    assert report.still_failed == 1
    assert stores.graph.memories[ids[0]].vector_sync == "failed"


def test_memories_of_two_models_are_handled_in_one_run() -> None:
    # Given Memories embedded by two models (one from before a migration), each drifted
    stores = Stores()
    stores.graph.register_model("old-model", DIM)
    old_store = stores.space("old-model", DIM)
    (new_pending,) = stores.write(staged("n1", 1, ["new pending"]), sync=False)
    (new_lost,) = stores.write(staged("n2", 1, ["new lost"]))
    (old_pending,) = stores.write(staged("o1", 1, ["old pending"]), sync=False, model="old-model")
    (old_lost,) = stores.write(staged("o2", 1, ["old lost"]), model="old-model")
    del stores.vectors.points[new_lost]
    del old_store.points[old_lost]
    stores.vectors.put_raw("orphan-new", 1)
    old_store.put_raw("orphan-old", 1)
    stores.clock.advance(GRACE_S + 1)

    # When one pass runs
    report = stores.run()

    # Then each model's Memories are synced to, and orphans removed from, its own collection
    assert report.error is None
    assert (report.backlog, report.resynced) == (2, 2)
    assert report.drift_found.missing_in_qdrant == report.drift_fixed.missing_in_qdrant == 2
    assert report.drift_found.orphan_points == report.drift_fixed.orphan_points == 2
    assert sorted(stores.vectors.points) == sorted([new_pending, new_lost])
    assert sorted(old_store.points) == sorted([old_pending, old_lost])
    assert {m.vector_sync for m in stores.graph.memories.values()} == {"synced"}


def test_scan_pages_through_more_memories_and_points_than_one_page() -> None:
    # Given more Memories and orphan points than a scan page holds
    stores = Stores(scan_page=10)
    ids = stores.write(staged("d", 1, [f"chunk {i}" for i in range(25)]))
    for memory_id in ids[::2]:
        del stores.vectors.points[memory_id]
    for i in range(23):
        stores.vectors.put_raw(f"orphan-{i:02}", 1)
    stores.clock.advance(GRACE_S + 1)

    report = stores.run()

    assert report.drift_found.missing_in_qdrant == 13
    assert report.drift_found.orphan_points == 23
    assert sorted(stores.vectors.points) == sorted(ids)


def test_an_orphan_rewritten_with_a_newer_version_meanwhile_is_kept() -> None:
    # The orphan delete is guarded by the version the point held when scanned
    stores = Stores()
    stores.vectors.put_raw("p", 3)
    store = stores.vectors
    original_scroll = store.scroll

    def scroll_then_rewrite(after: str | None, limit: int) -> tuple[list[PointState], str | None]:
        page = original_scroll(after, limit)
        store.put_raw("p", 4)  # a write of version 4 lands between the scan and the delete
        return page

    store.scroll = scroll_then_rewrite  # type: ignore[method-assign]

    report = stores.run()

    assert report.drift_found.orphan_points == 1
    assert store.version("p") == 4


def test_a_pass_asked_for_on_demand_retries_failed_rows_at_once() -> None:
    # Given a row failed a moment ago, its retry not due yet
    stores = Stores()
    ids = stores.write(staged("d", 1, ["one"]), sync=False)
    stores.graph.mark_failed({ids[0]: 1}, "qdrant is unavailable", stores.clock())

    # When a scheduled pass runs, then one asked for on demand (engram reconcile)
    scheduled = stores.reconciler.run(scheduled=True)
    on_demand = stores.reconciler.run(scheduled=False)

    # Then only the one asked for retries it
    assert (scheduled.backlog, scheduled.resynced) == (0, 0)
    assert (on_demand.backlog, on_demand.resynced) == (1, 1)
    assert stores.graph.memories[ids[0]].vector_sync == "synced"


def test_a_refused_row_does_not_hold_back_the_rows_batched_with_it() -> None:
    # Given a backlog whose oldest row Qdrant refuses, synced many rows per call
    stores = Stores(batch_size=10)
    (bad,) = stores.write(staged("bad", 1, ["refused"]), sync=False)
    stores.clock.advance(1)
    good = stores.write(staged("good", 1, ["one", "two"]), sync=False)
    stores.clock.advance(GRACE_S + 1)
    stores.vectors.reject_ids = {bad}

    # When scheduled passes run, each after the backoff is over, for an hour
    for _ in range(12):
        stores.run()
        stores.clock.advance(300)

    # Then the rows behind it were synced
    # (fails today: the refused row fails its whole batch, the batch's rows get one retry time and
    # come back together, and fail together again, pass after pass)
    assert {stores.graph.memories[i].vector_sync for i in good} == {"synced"}
    assert stores.graph.memories[bad].vector_sync == "failed"


def test_a_pass_sends_lost_messages_again_and_reports_them() -> None:
    stores, _ = _drifted()

    report = stores.reconciler.run(scheduled=True, redeliver=lambda: Redelivered(resent=2, waiting=1))

    assert (report.redelivered, report.redelivery_waiting, report.redelivery_error) == (2, 1, None)
    assert report.drift_fixed.orphan_points == 2  # the stores' repairs ran as ever


def test_redis_away_stops_the_redelivery_not_the_stores_repairs() -> None:
    stores, _ = _drifted()

    def redis_down() -> Redelivered:
        raise ServiceUnavailable("redis", "connection refused")

    report = stores.reconciler.run(scheduled=True, redeliver=redis_down)

    assert report.redelivery_error is not None and "connection refused" in report.redelivery_error
    assert report.error is None
    assert report.drift_fixed.orphan_points == 2


def test_a_dry_run_sends_nothing_again() -> None:
    stores, _ = _drifted()

    def must_not_run() -> Redelivered:
        raise AssertionError("a dry run redelivered")

    report = stores.reconciler.run(dry_run=True, redeliver=must_not_run)

    assert report.redelivered == 0


def test_each_store_is_read_by_range_and_only_what_a_range_missed_is_looked_up_by_id() -> None:
    # Given a synced Memory whose point a range read leaves out (as if the backup ordered its id
    # elsewhere), and no drift
    stores = Stores(scan_page=4)
    ids = sorted(stores.write(staged("d", 1, [f"chunk {i}" for i in range(10)])))
    store = stores.vectors
    original_scroll, original_states = store.scroll, store.states
    looked_up: list[list[str]] = []

    def scroll_without_one(after: str | None, limit: int) -> tuple[list[PointState], str | None]:
        page, more = original_scroll(after, limit)
        return [p for p in page if p.id != ids[5]], more

    def states(wanted: Sequence[str]) -> dict[str, PointState]:
        looked_up.append(list(wanted))
        return original_states(wanted)

    store.scroll = scroll_without_one  # type: ignore[method-assign]
    store.states = states  # type: ignore[method-assign]

    # When a pass runs
    report = stores.reconciler.run(scheduled=False)

    # Then the one point is looked up by id and found in step, and nothing else was looked up
    assert looked_up == [[ids[5]]]
    assert report.drift_found.model_dump() == {
        "missing_in_qdrant": 0,
        "stale_in_qdrant": 0,
        "orphan_points": 0,
    }
    assert (report.memories_compared, report.points_compared) == (10, {store.collection: 9})


def test_a_pass_scrolls_each_collection_in_reads_of_the_scroll_page_not_once_a_range() -> None:
    # Given 30 synced Memories, compared 4 at a time, points read ahead 12 at a time
    stores = Stores(scan_page=4, scroll_page=12)
    ids = stores.write(staged("d", 1, [f"chunk {i}" for i in range(30)]))
    store = stores.vectors
    original_scroll = store.scroll
    limits: list[int] = []

    def counted(after: str | None, limit: int) -> tuple[list[PointState], str | None]:
        limits.append(limit)
        return original_scroll(after, limit)

    store.scroll = counted  # type: ignore[method-assign]

    report = stores.reconciler.run(scheduled=False)

    # Then every point was compared, in three scrolls of 13 (one more: whether there is more)
    assert (report.memories_compared, report.points_compared) == (30, {store.collection: 30})
    assert limits == [13, 13, 13]
    assert report.drift_found.model_dump() == {
        "missing_in_qdrant": 0,
        "stale_in_qdrant": 0,
        "orphan_points": 0,
    }
    assert sorted(store.points) == sorted(ids)


def test_a_point_put_right_after_it_was_read_ahead_is_not_counted_as_drift() -> None:
    # Given a point stale when the sweep reads it ahead, put right by a sync before its range's
    # Memories are read
    stores = Stores(scan_page=4, scroll_page=50)
    ids = sorted(stores.write(staged("d", 1, [f"chunk {i}" for i in range(20)])))
    store = stores.vectors
    right = store.points[ids[15]]
    store.put_raw(ids[15], 1, content_hash="stale", embedding_model=MODEL)
    original_scroll = store.scroll

    def scroll_then_sync(after: str | None, limit: int) -> tuple[list[PointState], str | None]:
        page = original_scroll(after, limit)
        store.points[ids[15]] = right
        return page

    store.scroll = scroll_then_sync  # type: ignore[method-assign]

    # When a pass runs
    report = stores.reconciler.run(scheduled=False)

    # Then it read the point again before counting it, and found the stores in step
    assert report.drift_found.model_dump() == {
        "missing_in_qdrant": 0,
        "stale_in_qdrant": 0,
        "orphan_points": 0,
    }
