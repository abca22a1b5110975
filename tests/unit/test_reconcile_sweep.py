"""Scheduled passes that sweep the store a budget at a time (shared/services/sweep.py), over fakes."""

from __future__ import annotations

from shared.errors import ServiceUnavailable
from shared.services.guard import PrimaryGuard
from shared.services.reconcile import ReconcileReport
from shared.services.sweep import CollectionRound, SweepCursor, read_cursor
from tests.unit.fakes import FakeGraph, staged
from tests.unit.reconcile_fakes import GRACE_S, Stores

NO_DRIFT = {"missing_in_qdrant": 0, "stale_in_qdrant": 0, "orphan_points": 0}


def _store_of(count: int, **options: int) -> tuple[Stores, list[str]]:
    """``count`` Memories, all synced, and the clock past the grace period; their ids in order."""
    stores = Stores(**options)
    ids = stores.write(staged("d", 1, [f"chunk {i}" for i in range(count)]))
    stores.clock.advance(GRACE_S + 1)
    return stores, sorted(ids)


def _round(stores: Stores) -> list[ReconcileReport]:
    """Scheduled passes until the sweep has ended its round."""
    reports: list[ReconcileReport] = []
    rounds = read_cursor(stores.graph.sweep).rounds
    while read_cursor(stores.graph.sweep).rounds == rounds:
        reports.append(stores.run())
        assert len(reports) < 100, "the sweep never ended its round"
    return reports


def _found(reports: list[ReconcileReport]) -> dict[str, int]:
    kinds = NO_DRIFT.keys()
    return {kind: sum(getattr(r.drift_found, kind) for r in reports) for kind in kinds}


def test_passes_spread_over_a_round_find_drift_anywhere_and_each_compares_at_most_the_budget() -> None:
    # Given 95 synced Memories, swept 20 at a time, drifted at the start, the middle and the end
    stores, ids = _store_of(95, scan_budget=20, scan_page=7)
    lost = [ids[0], ids[47], ids[94]]
    for memory_id in lost:
        del stores.vectors.points[memory_id]
    stale = ids[60]
    stores.vectors.put_raw(stale, 1, content_hash="other", embedding_model="test-model")
    orphans = ["0" * 8 + "-orphan", "7" * 8 + "-orphan", "f" * 8 + "-orphan"]
    for orphan in orphans:
        stores.vectors.put_raw(orphan, 3)

    # When scheduled passes run until the sweep has ended a round
    reports = _round(stores)

    # Then the round took several passes, none compared more than its budget, and together they
    # compared every Memory and point once, and found and fixed every drift
    assert len(reports) == 5
    assert all(r.scan_budget == 20 and r.error is None for r in reports)
    assert all(r.memories_compared <= 20 for r in reports)
    assert all(n <= 20 for r in reports for n in r.points_compared.values())
    assert sum(r.memories_compared for r in reports) == 95
    assert sum(r.points_compared[stores.vectors.collection] for r in reports) == 92 + 3
    assert _found(reports) == {"missing_in_qdrant": 3, "stale_in_qdrant": 1, "orphan_points": 3}
    assert sorted(stores.vectors.points) == ids
    assert (
        stores.vectors.points[stale].payload["content_hash"]
        == stores.graph.memories[stale].memory.content_hash
    )


def test_the_cursor_wraps_and_the_next_round_starts_from_the_first_id() -> None:
    # Given a round swept to its end
    stores, ids = _store_of(45, scan_budget=20)
    first_round = _round(stores)
    cursor = read_cursor(stores.graph.sweep)
    assert [r.memories_compared for r in first_round] == [20, 20, 5]
    assert cursor == SweepCursor(rounds=1)

    # When the first Memory's point is lost, behind the sweep, and the next pass runs
    del stores.vectors.points[ids[0]]
    report = stores.run()

    # Then it starts again from the first id and finds it
    assert report.drift_found.missing_in_qdrant == report.drift_fixed.missing_in_qdrant == 1
    assert report.sweep is not None and report.sweep.after == ids[19]
    assert ids[0] in stores.vectors.points


def test_a_pass_asked_for_on_demand_sweeps_everything_and_leaves_the_cursor_alone() -> None:
    # Given a sweep under way, and drift behind and ahead of its cursor
    stores, ids = _store_of(60, scan_budget=20)
    stores.run()
    saved = stores.graph.sweep
    for memory_id in (ids[3], ids[30], ids[59]):
        del stores.vectors.points[memory_id]
    stores.vectors.put_raw("ffffffff-orphan", 2)

    # When a pass is asked for on demand (engram reconcile)
    report = stores.reconciler.run(scheduled=False)

    # Then it compared every Memory and point, fixed all, and the scheduled sweep goes on as it was
    assert (report.scan_budget, report.sweep) == (None, None)
    assert report.memories_compared == 60
    assert report.points_compared == {stores.vectors.collection: 57 + 1}
    assert report.drift_fixed.model_dump() == {
        "missing_in_qdrant": 3,
        "stale_in_qdrant": 0,
        "orphan_points": 1,
    }
    assert sorted(stores.vectors.points) == ids
    assert stores.graph.sweep == saved


def test_a_dry_run_sweeps_its_slice_but_saves_no_cursor() -> None:
    stores, ids = _store_of(50, scan_budget=20)
    del stores.vectors.points[ids[5]]

    report = stores.run(dry_run=True)

    assert report.memories_compared == 20 and report.drift_found.missing_in_qdrant == 1
    assert report.sweep is not None and report.sweep.after == ids[19]
    assert stores.graph.sweep is None
    assert ids[5] not in stores.vectors.points


def test_a_slice_whose_repair_meets_an_outage_is_compared_again_by_the_next_pass() -> None:
    # Given a sweep under way, and the next slice's Memory whose point was lost
    stores, ids = _store_of(60, scan_budget=20, scan_page=10)
    stores.run()
    del stores.vectors.points[ids[25]]
    stores.vectors.fail_with = ServiceUnavailable("qdrant", "connection refused")

    # When the pass meets Qdrant down, and then a pass runs once it is back
    down = stores.run()
    stores.vectors.fail_with = None
    back = stores.run()

    # Then the cursor did not move past what was not compared, and the point is back
    assert down.error is not None and down.sweep is not None and down.sweep.after == ids[19]
    assert back.drift_fixed.missing_in_qdrant == 1
    assert ids[25] in stores.vectors.points


def _primary_lost_a_third() -> tuple[Stores, list[str]]:
    """300 Memories synced, then 90 of them gone from Neo4j without a tombstone (a primary restored
    from an old copy, a bad migration): 90 orphans, 30% of the collection, where 20% is the most
    deleted at once without --force; above the guard's 50%, so the primary is not lost."""
    stores, ids = _store_of(300, scan_budget=50, mass_delete_min=10)
    for memory_id in ids[::10] + ids[1::10] + ids[2::10]:
        del stores.graph.memories[memory_id]
    return stores, ids


def test_a_mass_deletion_is_refused_though_every_slice_holds_fewer_orphans_than_the_limit() -> None:
    # Given a third of the backup's points without a Memory, about 15 in each slice of 50 (the
    # limit, 20% of the collection, is 60: judged by the slice alone, each would be deleted)
    stores, _ = _primary_lost_a_third()

    # When scheduled passes sweep two whole rounds
    reports = _round(stores) + _round(stores)

    # Then every pass refused, judging the orphans against the whole collection, and none is deleted
    assert _found(reports)["orphan_points"] == 180
    assert all(r.drift_found.orphan_points < 60 for r in reports)
    assert all(r.mass_delete_refused is not None for r in reports)
    assert all(r.drift_fixed.orphan_points == 0 for r in reports)
    assert len(stores.vectors.points) == 300
    refused = reports[0].mass_delete_refused or ""
    assert "the 50 points its sweep compared this round: about 90 of 300" in refused
    assert "--force" in refused


def test_forced_on_demand_the_mass_deletion_goes_through() -> None:
    stores, _ = _primary_lost_a_third()
    assert stores.run().mass_delete_refused is not None

    report = stores.reconciler.run(scheduled=False, force=True)

    assert report.drift_fixed.orphan_points == 90
    assert sorted(stores.vectors.points) == sorted(stores.graph.memories)


def test_orphans_under_the_limit_spread_over_the_round_are_deleted() -> None:
    # Given 20 orphan points among 200 (10%, under the 20% limit), spread over the id space
    stores, ids = _store_of(200, scan_budget=50, mass_delete_min=10)
    for memory_id in ids[::10]:
        del stores.graph.memories[memory_id]

    # When a round of scheduled passes runs
    reports = _round(stores)

    # Then none refused and every orphan is gone
    assert all(r.mass_delete_refused is None for r in reports)
    assert sum(r.drift_fixed.orphan_points for r in reports) == 20
    assert sorted(stores.vectors.points) == sorted(stores.graph.memories)


def test_a_round_deletes_at_most_the_limit_whatever_its_first_slices_showed() -> None:
    # Given a round whose first slices hold few orphans and whose last holds many (the projection
    # from the first slices is under the limit): 20% of 200 is 40
    stores, ids = _store_of(200, scan_budget=50, mass_delete_min=10)
    for memory_id in ids[5:10] + ids[150:200]:
        del stores.graph.memories[memory_id]

    reports = _round(stores)

    # Then what the round deleted is within the limit, and the rest was refused
    deleted = sum(r.drift_fixed.orphan_points for r in reports)
    assert deleted <= 40
    assert reports[-1].mass_delete_refused is not None and reports[0].mass_delete_refused is None
    assert len(stores.vectors.points) == 200 - deleted


def test_a_wiped_primary_deletes_nothing_in_a_slice_either() -> None:
    # Given a swept store whose primary is replaced by an empty one
    stores, _ = _store_of(80, scan_budget=20)
    _round(stores)
    stores.graph = FakeGraph(stores.clock)
    stores.graph.store_id = "store-b"
    stores.graph.ensure_schema("test-model", 3)
    stores.reconciler = type(stores.reconciler)(
        stores.graph,
        stores.space,
        stores.syncer,
        stores.clock,
        GRACE_S,
        10,
        100,
        guard=PrimaryGuard(stores.graph, 0.5),
        scan_budget=20,
    )

    # When a scheduled pass runs
    report = stores.run()

    # Then it says so, and every point is kept
    assert report.primary_lost is not None and "primary_lost" in report.primary_lost
    assert report.drift_found.orphan_points == 20
    assert report.drift_fixed == report.drift_fixed.model_validate(NO_DRIFT)
    assert len(stores.vectors.points) == 80


def test_a_cursor_of_another_shape_starts_a_new_round() -> None:
    assert read_cursor('{"after": 7}') == SweepCursor()
    assert read_cursor("not json") == SweepCursor()
    assert read_cursor(None) == SweepCursor()


def test_the_projection_counts_the_round_not_the_pass() -> None:
    # 10 orphans in the 100 points compared so far, of 1,000: about 100 over the collection
    round_ = CollectionRound(compared=100, orphans=10)
    assert round_.judged_orphans(1000, complete=False) == 100
    # a round that has compared every point judges what it counted
    assert round_.judged_orphans(1000, complete=True) == 10
    assert CollectionRound(compared=1200, orphans=10).judged_orphans(1000, complete=False) == 10
    # the next round starts afresh
    assert SweepCursor(after="x", rounds=2, collections={"c": round_}).advanced(None, 5, {}) == SweepCursor(
        rounds=3
    )
