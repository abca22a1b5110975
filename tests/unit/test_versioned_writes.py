"""Versioned writes through the graph store and the sync: an older write arriving late is a no-op
in both stores, and a delete is a write like any other."""

from __future__ import annotations

import pytest

from shared.models import StagedDocument
from shared.services.sync import Syncer
from shared.stores.base import VectorPoint, WriteOutcome
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

    def write(self, doc: StagedDocument) -> WriteOutcome:
        """As the write stage does: Neo4j first, then Qdrant synced from what Neo4j holds."""
        outcome = self.graph.write_documents([write_of(doc)])
        self.syncer.sync(outcome.memory_ids + outcome.removed_ids)
        return outcome

    def delete(self, doc: StagedDocument, version: int) -> list[str]:
        removed = self.graph.delete_documents([doc.key], version)
        self.syncer.sync(removed)
        return removed

    def point_versions(self) -> dict[str, int | None]:
        return {i: p.version for i, p in sorted(self.vectors.points.items())}


@pytest.fixture
def stores() -> Stores:
    return Stores()


def test_older_version_after_newer_is_a_no_op_in_both_stores(stores: Stores) -> None:
    # Given version 2 written and synced
    v2 = staged("d", 2, ["new one", "new two"])
    stores.write(v2)

    # When version 1 arrives late
    outcome = stores.write(staged("d", 1, ["old one", "old two", "old three"]))

    # Then it is stale, and both stores still hold version 2 only
    assert outcome.stale == [v2.key]
    assert outcome.written == outcome.memory_ids == outcome.removed_ids == []
    assert set(stores.graph.versions_of(v2.key).values()) == {2}
    assert set(stores.point_versions().values()) == {2}
    assert [stores.vectors.points[c.id].payload["content"] for c in v2.chunks] == ["new one", "new two"]


def test_older_version_upserted_straight_to_qdrant_leaves_the_newer_point(stores: Stores) -> None:
    # Given version 2's points in Qdrant
    stores.write(staged("d", 2, ["new"]))
    point_id = staged("d", 2, ["new"]).chunks[0].id

    # When an upsert of version 1 for the same point reaches Qdrant
    old = stores.graph.sync_rows([point_id]).live[0]
    stores.vectors.upsert([VectorPoint(point_id, [9.0, 9.0, 9.0], 1, old.memory.payload())])

    # Then the point still holds version 2
    assert stores.vectors.version(point_id) == 2
    assert stores.vectors.points[point_id].vector != [9.0, 9.0, 9.0]


def test_the_same_version_twice_is_idempotent(stores: Stores) -> None:
    # Given version 1 written and synced
    doc = staged("d", 1, ["one", "two"])
    stores.write(doc)
    graph_before = stores.graph.versions_of(doc.key)
    points_before = dict(stores.vectors.points)

    # When the same version is written again (a redelivered task)
    outcome = stores.write(doc)

    # Then it is accepted, nothing is removed, and both stores hold the same
    assert outcome.written == [doc.key]
    assert outcome.removed_ids == []
    assert stores.graph.versions_of(doc.key) == graph_before
    assert stores.vectors.points == points_before
    assert {m.vector_sync for m in stores.graph.memories.values()} == {"synced"}
    assert stores.graph.tombstones == {}


def test_shorter_version_removes_the_extra_chunks_from_both_stores(stores: Stores) -> None:
    # Given version 1 with three chunks in both stores
    v1 = staged("d", 1, ["one", "two", "three"])
    stores.write(v1)
    assert len(stores.vectors.points) == 3

    # When version 2 has only one
    v2 = staged("d", 2, ["only"])
    outcome = stores.write(v2)

    # Then the two extra chunks are gone from Neo4j and Qdrant, and their tombstones forgotten
    extra = [c.id for c in v1.chunks[1:]]
    assert sorted(outcome.removed_ids) == sorted(extra)
    assert stores.graph.versions_of(v2.key) == {v2.chunks[0].id: 2}
    assert stores.point_versions() == {v2.chunks[0].id: 2}
    assert stores.graph.tombstones == {}


def test_stale_chunk_tombstones_carry_the_new_version(stores: Stores) -> None:
    # Given version 1 with two chunks, written but Qdrant not yet synced
    stores.graph.write_documents([write_of(staged("d", 1, ["one", "two"]))])

    # When version 5 keeps one chunk
    v5 = staged("d", 5, ["one"])
    outcome = stores.graph.write_documents([write_of(v5)])

    # Then the removed chunk is tombstoned at version 5, so Qdrant's copy (at most 5) goes too
    (removed,) = outcome.removed_ids
    assert stores.graph.tombstones[removed].version == 5


def test_delete_then_a_late_older_write_leaves_the_document_deleted(stores: Stores) -> None:
    # Given version 1 written, then deleted at version 3
    v1 = staged("d", 1, ["one", "two"])
    stores.write(v1)
    removed = stores.delete(v1, 3)
    assert sorted(removed) == sorted(c.id for c in v1.chunks)

    # When version 2, accepted before the delete, is written late
    outcome = stores.write(staged("d", 2, ["two again"]))

    # Then the document stays deleted in both stores
    assert outcome.stale == [v1.key]
    assert v1.key not in stores.graph.documents
    assert stores.graph.memories == {}
    assert stores.vectors.points == {}
    assert stores.graph.deleted_documents == {v1.key: 3}


def test_a_newer_write_after_a_delete_brings_the_document_back(stores: Stores) -> None:
    v1 = staged("d", 1, ["one"])
    stores.write(v1)
    stores.delete(v1, 3)

    outcome = stores.write(staged("d", 4, ["back"]))

    assert outcome.written == [v1.key]
    assert stores.point_versions() == {v1.chunks[0].id: 4}
    assert v1.key not in stores.graph.deleted_documents


def test_a_delete_older_than_the_stored_version_is_a_no_op(stores: Stores) -> None:
    v5 = staged("d", 5, ["five"])
    stores.write(v5)

    removed = stores.delete(v5, 4)

    assert removed == []
    assert stores.point_versions() == {v5.chunks[0].id: 5}


def test_delete_before_the_first_write_lands_keeps_the_document_deleted(stores: Stores) -> None:
    # Given a document accepted at version 2 whose write is still on its way (not in Neo4j)
    v2 = staged("d", 2, ["said then regretted"])

    # When the user deletes it at version 3, and then the write of version 2 lands
    stores.delete(v2, 3)
    outcome = stores.write(v2)

    # Then it must stay deleted: the delete is newer
    # (fails today: DELETE_DOCUMENTS MATCHes the Document, so with none there it leaves no
    # DeletedDocument behind and the older write lands; FakeGraph follows the Cypher)
    assert outcome.stale == [v2.key]
    assert stores.graph.memories == {}
    assert stores.vectors.points == {}
