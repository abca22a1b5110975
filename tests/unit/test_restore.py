"""The reconciler's guard and engram restore, over fakes: a wiped primary never costs the backup,
and the backup gives the primary back."""

from __future__ import annotations

import pytest

from shared.errors import ConfigurationError
from shared.services.backup import QdrantSource
from shared.services.guard import PrimaryGuard
from shared.services.reconcile import Reconciler
from shared.services.restore import Restorer
from shared.services.sync import Syncer
from tests.unit.fakes import DIM, MODEL, Clock, FakeGraph, FakeVectors, FakeVectorSpace, staged, write_of

DOCS = 60  # 3 chunks each: 180 points, over the mass-deletion floor below
FLOOR = 20


class Stack:
    """A primary, a backup, and a reconciler over them; ``wipe`` gives a new, empty primary."""

    def __init__(self) -> None:
        self.clock = Clock()
        self.space = FakeVectorSpace()
        self.graph = FakeGraph(self.clock)
        self.graph.ensure_schema(MODEL, DIM)

    @property
    def vectors(self) -> FakeVectors:
        return self.space(MODEL, DIM)

    def reconciler(self) -> Reconciler:
        guard = PrimaryGuard(self.graph, 0.5)
        syncer = Syncer(self.graph, self.space, self.clock)
        held = [key for key, store in self.space.stores.items() if store.points]
        return Reconciler(
            self.graph, self.space, syncer, self.clock, 60, 50, 40, guard, 0.2, FLOOR, lambda: held
        )

    def restorer(self) -> Restorer:
        return Restorer(self.graph, self.clock, batch_documents=7, min_share=0.5)

    def write(self, first: int, count: int, version: int = 1, user_id: str = "alice") -> None:
        syncer = Syncer(self.graph, self.space, self.clock)
        for n in range(first, first + count):
            doc = staged(f"doc-{n}", version, [f"doc {n} part {i} v{version}" for i in range(3)], user_id)
            outcome = self.graph.write_documents([write_of(doc)])
            syncer.sync(outcome.memory_ids)

    def wipe(self, bootstrap: bool = True) -> None:
        """Neo4j's data lost: a new store, bootstrapped again with a store id of its own (or not
        yet: no process has written to it)."""
        self.graph = FakeGraph(self.clock)
        self.graph.store_id = "store-b" if bootstrap else None
        if bootstrap:
            self.graph.ensure_schema(MODEL, DIM)


def _synced_and_checked() -> Stack:
    stack = Stack()
    stack.write(0, DOCS)
    report = stack.reconciler().run()
    assert report.primary_lost is None and stack.vectors.identity() == "store-a"
    return stack


def test_a_wiped_primary_is_refused_and_the_backup_kept() -> None:
    # Given a backup in step with its primary, and then the primary's data lost
    stack = _synced_and_checked()
    stack.wipe()
    stack.write(1000, 1)  # one new document after the wipe

    # When the reconciler runs (dry, then for real, then forced)
    dry = stack.reconciler().run(dry_run=True)
    real = stack.reconciler().run()
    forced = stack.reconciler().run(force=True)

    # Then it finds the orphans but deletes none, and says why and what to do
    assert dry.drift_found.orphan_points == DOCS * 3
    for report in (real, forced):
        assert report.drift_fixed.orphan_points == 0
        assert report.primary_lost is not None and "engram restore" in report.primary_lost
    assert stack.vectors.count() == DOCS * 3 + 3
    assert stack.graph.primary_lost == real.primary_lost
    assert real.qdrant_points == {stack.vectors.collection: DOCS * 3 + 3}


def test_a_wiped_primary_that_knows_no_model_yet_is_reported_lost() -> None:
    # Given a wiped primary nothing has written to: it knows of no model, so no collection
    stack = _synced_and_checked()
    stack.wipe(bootstrap=False)

    # When the reconciler runs
    report = stack.reconciler().run()

    # Then the backup's own collections are checked: the primary is lost, and the status says so
    assert report.primary_lost is not None
    assert report.qdrant_points == {stack.vectors.collection: DOCS * 3}
    assert stack.graph.primary_lost == report.primary_lost and stack.vectors.count() == DOCS * 3


def test_a_primary_far_smaller_than_an_unstamped_backup_is_refused() -> None:
    # Given a backup that records no store id (points from before identities) and a wiped primary
    stack = Stack()
    stack.write(0, DOCS)
    stack.wipe()

    # When the reconciler runs
    report = stack.reconciler().run()

    # Then the size of the primary alone is enough to refuse
    assert report.primary_lost is not None and "0 memories" in report.primary_lost
    assert stack.vectors.count() == DOCS * 3
    assert stack.vectors.identity() is None


def test_a_mass_deletion_needs_force() -> None:
    # Given the primary's own store, but half its Memories gone without tombstones
    stack = _synced_and_checked()
    gone = sorted(stack.graph.memories)[: DOCS * 3 // 2]
    for memory_id in gone:
        del stack.graph.memories[memory_id]
    stack.graph.store_id = "store-a"

    # When a pass runs, then a forced one
    # (the share check passes: 90 memories of 180 points is the threshold 0.5)
    refused = stack.reconciler().run()
    forced = stack.reconciler().run(force=True)

    # Then the first keeps the points and says so; the forced one deletes them
    assert refused.primary_lost is None
    assert refused.mass_delete_refused is not None and "--force" in refused.mass_delete_refused
    assert refused.drift_fixed.orphan_points == 0
    assert forced.drift_fixed.orphan_points == len(gone)
    assert stack.vectors.count() == DOCS * 3 - len(gone)


def test_a_few_orphans_are_deleted_without_force() -> None:
    stack = _synced_and_checked()
    stack.vectors.put_raw("orphan", 1, content_hash="x", embedding_model=MODEL)

    report = stack.reconciler().run()

    assert report.drift_fixed.orphan_points == 1 and "orphan" not in stack.vectors.points


def test_restore_gives_back_every_memory_and_the_guard_accepts_the_primary_again() -> None:
    # Given a wiped primary whose backup holds everything
    stack = _synced_and_checked()
    before = {i: (m.memory, list(m.embedding)) for i, m in stack.graph.memories.items()}
    stack.wipe()

    # When it is restored from the backup
    report = stack.restorer().to_neo4j(QdrantSource(stack.vectors))

    # Then every Memory is back as it was, synced, and the primary is the backup's store again
    assert (report.restored, report.documents, report.unreadable_count) == (DOCS * 3, DOCS, 0)
    assert report.synced == DOCS * 3
    after = {i: (m.memory, list(m.embedding)) for i, m in stack.graph.memories.items()}
    assert after == before
    assert all(m.vector_sync == "synced" for m in stack.graph.memories.values())
    assert stack.graph.store_id == "store-a" == report.store_id
    # and the reconciler finds parity, with nothing lost
    check = stack.reconciler().run()
    assert check.primary_lost is None
    assert check.drift_found.model_dump() == {
        "missing_in_qdrant": 0,
        "stale_in_qdrant": 0,
        "orphan_points": 0,
    }
    assert stack.vectors.count() == DOCS * 3


def test_restore_is_idempotent_and_leaves_newer_documents_alone() -> None:
    stack = _synced_and_checked()
    stack.wipe()
    stack.restorer().to_neo4j(QdrantSource(stack.vectors))
    # a newer version of one document written meanwhile (not yet synced)
    newer = staged("doc-3", 9, ["brand new"])
    stack.graph.write_documents([write_of(newer)])

    again = stack.restorer().to_neo4j(QdrantSource(stack.vectors), fresh=True)

    assert again.skipped_newer == 3
    assert again.restored == DOCS * 3 - 3
    assert stack.graph.versions_of(newer.key) == {newer.chunks[0].id: 9}
    assert len(stack.graph.memories) == DOCS * 3 - 3 + 1


def test_unreadable_points_are_reported_with_their_reason() -> None:
    stack = _synced_and_checked()
    stack.wipe()
    stack.vectors.put_raw("no-key", 3, content="x")
    victim = sorted(stack.vectors.points)[5]
    stack.vectors.points[victim].payload.pop("content")

    report = stack.restorer().to_neo4j(QdrantSource(stack.vectors))

    reasons = {bad.id: bad.reason for bad in report.unreadable}
    assert report.unreadable_count == 2
    assert "document_key" in reasons["no-key"]
    assert "content" in reasons[victim]
    assert report.restored == DOCS * 3 - 1


def test_restore_resumes_after_a_crash_from_its_checkpoint() -> None:
    # Given a restore that dies after its second batch
    stack = _synced_and_checked()
    stack.wipe()
    calls = []

    def crash(*_: object) -> None:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        stack.restorer().to_neo4j(QdrantSource(stack.vectors), progress=crash)
    written_before = len(stack.graph.memories)

    # When it is run again
    report = stack.restorer().to_neo4j(QdrantSource(stack.vectors))

    # Then it goes on after the last document done, and everything is there
    assert written_before == 2 * 7 * 3
    assert report.resumed_after is not None
    assert report.restored == DOCS * 3 - written_before
    assert len(stack.graph.memories) == DOCS * 3
    assert stack.graph.restore_states["restore:neo4j"]["state"] == "done"


def test_a_tenant_and_a_dry_run() -> None:
    stack = Stack()
    stack.write(0, 4)
    stack.write(100, 2, user_id="bob")
    stack.wipe()

    dry = stack.restorer().to_neo4j(QdrantSource(stack.vectors), dry_run=True)
    bob = stack.restorer().to_neo4j(QdrantSource(stack.vectors), tenant="bob")

    assert (dry.restored, len(stack.graph.memories)) == (18, 6)
    assert bob.restored == 6
    assert {m.memory.user_id for m in stack.graph.memories.values()} == {"bob"}


def test_restore_to_qdrant_rebuilds_a_lost_backup() -> None:
    # Given the backup's collection lost
    stack = _synced_and_checked()
    stack.space.stores.clear()

    # When Qdrant is rebuilt from Neo4j
    report = stack.restorer().to_qdrant(Syncer(stack.graph, stack.space, stack.clock), page=25)

    # Then every Memory has its point again, and a pass finds parity and stamps the new collection
    assert (report.restored, report.failed) == (DOCS * 3, 0)
    assert stack.vectors.count() == DOCS * 3
    check = stack.reconciler().run()
    assert check.primary_lost is None and check.drift_found.orphan_points == 0
    assert stack.vectors.identity() == "store-a"


def test_restore_writes_nothing_to_a_database_without_its_schema_and_names_what_is_missing() -> None:
    # Given a wiped primary that lacks two parts of its schema after the bootstrap
    stack = _synced_and_checked()
    stack.wipe()
    stack.graph.missing = ["memory_id", "memory_user_id"]

    # When it is restored
    with pytest.raises(ConfigurationError) as refused:
        stack.restorer().to_neo4j(QdrantSource(stack.vectors))

    # Then nothing was written, and the refusal names what is missing
    assert stack.graph.memories == {}
    assert "memory_id, memory_user_id" in str(refused.value)
