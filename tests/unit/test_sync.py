"""The Syncer: Qdrant brought level with what Neo4j holds now, whatever writes race it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import pytest

from shared.errors import ServiceUnavailable
from shared.models import StagedDocument
from shared.services.guard import PrimaryGuard
from shared.services.reconcile import Reconciler
from shared.services.sync import Syncer
from shared.stores.base import VectorPoint
from tests.unit.fakes import DIM, MODEL, Clock, FakeGraph, FakeVectors, FakeVectorSpace, staged, write_of


class Stores:
    def __init__(self) -> None:
        self.clock = Clock()
        self.graph = FakeGraph(self.clock)
        self.space = FakeVectorSpace()
        self.syncer = Syncer(self.graph, self.space, self.clock)
        self.graph.ensure_schema(MODEL, DIM)

    @property
    def vectors(self) -> FakeVectors:
        return self.space(MODEL, DIM)

    def write(self, doc: StagedDocument) -> list[str]:
        """Neo4j only; returns the ids to sync."""
        outcome = self.graph.write_documents([write_of(doc)])
        return outcome.memory_ids + outcome.removed_ids


@pytest.fixture
def stores() -> Stores:
    return Stores()


def test_sync_writes_pending_memories_and_marks_them_synced(stores: Stores) -> None:
    ids = stores.write(staged("d", 1, ["one", "two"]))

    outcome = stores.syncer.sync(ids)

    assert (outcome.synced, outcome.failed, outcome.error) == (2, 0, None)
    assert {stores.vectors.version(i) for i in ids} == {1}
    assert {stores.graph.memories[i].vector_sync for i in ids} == {"synced"}
    assert stores.vectors.points[ids[0]].payload["content"] == "one"


def test_late_upsert_of_version_1_after_version_2_was_synced(stores: Stores) -> None:
    # Given version 1 written to Neo4j and a sync of it that has read version 1 back
    v1 = staged("d", 1, ["old"])
    (memory_id,) = stores.write(v1)
    v2 = staged("d", 2, ["new"])

    def second_writer(points: Sequence[VectorPoint]) -> None:
        # When version 2 is written and fully synced just before version 1's upsert lands
        assert [p.version for p in points] == [1]
        stores.syncer.sync(stores.write(v2))
        assert stores.vectors.version(memory_id) == 2

    stores.vectors.before_upsert.append(second_writer)
    outcome = stores.syncer.sync([memory_id])

    # Then Qdrant holds version 2, and Neo4j is synced at version 2
    assert stores.vectors.version(memory_id) == 2
    assert stores.vectors.points[memory_id].payload["content"] == "new"
    stored = stores.graph.memories[memory_id]
    assert (stored.memory.version, stored.vector_sync) == (2, "synced")
    assert outcome.failed == 0


def test_version_2_written_but_not_yet_synced_during_a_sync_of_version_1(stores: Stores) -> None:
    # Given a sync of version 1 that has read it back
    (memory_id,) = stores.write(staged("d", 1, ["old"]))

    # When version 2 reaches Neo4j (its own sync not run yet) before version 1's upsert lands
    def second_writer(_: Sequence[VectorPoint]) -> None:
        stores.write(staged("d", 2, ["new"]))

    stores.vectors.before_upsert.append(second_writer)
    outcome = stores.syncer.sync([memory_id])

    # Then the sync does not mark version 2 synced on the strength of version 1's point: it reads
    # again and writes version 2
    assert stores.vectors.version(memory_id) == 2
    stored = stores.graph.memories[memory_id]
    assert (stored.memory.version, stored.vector_sync) == (2, "synced")
    assert outcome.synced == 1


def test_memory_deleted_between_read_and_upsert_ends_with_no_point(stores: Stores) -> None:
    # Given a sync of version 1 that has read it back
    v1 = staged("d", 1, ["old"])
    (memory_id,) = stores.write(v1)

    def deleter(_: Sequence[VectorPoint]) -> None:
        # When the document is deleted, and the delete's own sync finishes, before the upsert lands
        removed = stores.graph.delete_documents([v1.key], 2)
        stores.syncer.sync(removed)
        assert stores.graph.tombstones == {}

    stores.vectors.before_upsert.append(deleter)
    stores.syncer.sync([memory_id])

    # Then the point the sync wrote after the delete is taken back
    assert stores.vectors.points == {}
    assert stores.graph.memories == {}
    assert stores.graph.tombstones == {}


def test_memory_deleted_between_read_and_upsert_before_the_delete_syncs(stores: Stores) -> None:
    v1 = staged("d", 1, ["old"])
    (memory_id,) = stores.write(v1)

    def deleter(_: Sequence[VectorPoint]) -> None:
        stores.graph.delete_documents([v1.key], 2)

    stores.vectors.before_upsert.append(deleter)

    outcome = stores.syncer.sync([memory_id])

    assert stores.vectors.points == {}
    assert stores.graph.tombstones == {}
    assert outcome.deleted == 1


def test_qdrant_down_records_memories_failed_with_a_retry_time(stores: Stores) -> None:
    # Given Memories written to Neo4j while Qdrant is down
    ids = stores.write(staged("d", 1, ["one", "two"]))
    stores.vectors.fail_with = ServiceUnavailable("qdrant", "connection refused")

    # When they are synced
    outcome = stores.syncer.sync(ids)

    # Then nothing is synced; each is failed with the error and a retry due later
    assert (outcome.synced, outcome.failed, outcome.permanent) == (0, 2, False)
    assert outcome.error is not None and "connection refused" in outcome.error
    assert sorted(outcome.failed_ids) == sorted(ids)
    for memory_id in ids:
        stored = stores.graph.memories[memory_id]
        assert stored.vector_sync == "failed"
        assert stored.error is not None and "qdrant is unavailable" in stored.error
        assert stored.retry_at is not None and stored.retry_at > stores.clock()
        assert stored.attempts == 1
    # and the Neo4j write is not undone
    assert set(stores.graph.versions_of(staged("d", 1, ["x"]).key).values()) == {1}


def test_failed_memories_back_off_longer_each_attempt_up_to_the_cap(stores: Stores) -> None:
    (memory_id,) = stores.write(staged("d", 1, ["one"]))
    stores.vectors.fail_with = ServiceUnavailable("qdrant", "down")

    waits = []
    for _ in range(12):
        stores.syncer.sync([memory_id])
        retry_at = stores.graph.memories[memory_id].retry_at
        assert retry_at is not None
        waits.append((retry_at - stores.clock()).total_seconds())

    assert waits[:3] == [10, 20, 40]
    assert waits == sorted(waits)
    assert max(waits) == stores.graph.retry_cap_s


def test_reconciler_later_syncs_what_failed_while_qdrant_was_down(stores: Stores) -> None:
    # Given Memories recorded failed while Qdrant was down
    ids = stores.write(staged("d", 1, ["one", "two"]))
    stores.vectors.fail_with = ServiceUnavailable("qdrant", "down")
    stores.syncer.sync(ids)
    reconciler = Reconciler(
        stores.graph, stores.space, stores.syncer, stores.clock, 60, 10, 100, PrimaryGuard(stores.graph, 0.5)
    )

    # When a scheduled reconcile pass runs before their retry is due, nothing is tried
    stores.vectors.fail_with = None
    early = reconciler.run(scheduled=True)
    assert (early.backlog, early.resynced) == (0, 0)

    # and when one runs after Qdrant is back and the retry is due
    stores.clock.advance(11)
    report = reconciler.run(scheduled=True)

    # Then they are synced
    assert (report.backlog, report.resynced, report.still_failed, report.error) == (2, 2, 0, None)
    assert {stores.graph.memories[i].vector_sync for i in ids} == {"synced"}
    assert {stores.vectors.version(i) for i in ids} == {1}


def test_delete_while_qdrant_is_down_keeps_its_tombstones_for_the_reconciler(stores: Stores) -> None:
    v1 = staged("d", 1, ["one"])
    ids = stores.write(v1)
    stores.syncer.sync(ids)
    stores.vectors.fail_with = ServiceUnavailable("qdrant", "down")

    removed = stores.graph.delete_documents([v1.key], 2)
    outcome = stores.syncer.sync(removed)

    assert outcome.failed == 1
    tombstone = stores.graph.tombstones[ids[0]]
    assert tombstone.retry_at is not None and tombstone.retry_at > stores.clock()
    assert stores.vectors.version(ids[0]) == 1  # still there, until Qdrant is back

    stores.vectors.fail_with = None
    stores.clock.advance(timedelta(minutes=10).total_seconds())
    Reconciler(
        stores.graph, stores.space, stores.syncer, stores.clock, 60, 10, 100, PrimaryGuard(stores.graph, 0.5)
    ).run(scheduled=True)

    assert stores.vectors.points == {}
    assert stores.graph.tombstones == {}


def test_qdrant_refusing_a_point_is_a_permanent_failure(stores: Stores) -> None:
    ids = stores.write(staged("d", 1, ["one"]))
    stores.vectors.reject_ids = set(ids)

    outcome = stores.syncer.sync(ids)

    assert outcome.permanent is True
    assert stores.graph.memories[ids[0]].vector_sync == "failed"


def test_a_point_qdrant_refuses_fails_alone_not_the_points_synced_with_it(stores: Stores) -> None:
    # Given three Memories synced in one call, one of which Qdrant refuses (a 400 refuses the
    # whole upsert request, as Qdrant does)
    (bad,) = stores.write(staged("bad", 1, ["refused"]))
    good = stores.write(staged("good", 1, ["one", "two"]))
    stores.vectors.reject_ids = {bad}

    # When they are synced together
    outcome = stores.syncer.sync([bad, *good])

    # Then only the refused one is failed; the others are in Qdrant and synced
    # (fails today: Syncer._round marks every Memory of the refused upsert failed)
    assert outcome.failed_ids == [bad]
    assert {stores.graph.memories[i].vector_sync for i in good} == {"synced"}
    assert sorted(stores.vectors.points) == sorted(good)
