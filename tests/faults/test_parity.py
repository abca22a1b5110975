"""The parity comparison on its own: what counts as lost, stale and duplicated."""

from __future__ import annotations

from tests.faults.corpus import ExpectedMemory
from tests.faults.parity import Stored, compare


def expected(version: int | None = None) -> dict[str, ExpectedMemory]:
    return {mid: ExpectedMemory("doc", i, f"hash-{mid}", version) for i, mid in enumerate(("a", "b", "c"))}


def held(ids: str, version: int | None = None, sync: str | None = "synced") -> dict[str, Stored]:
    return {mid: Stored(mid, f"hash-{mid}", version, sync) for mid in ids}


def test_both_stores_holding_exactly_the_expected_memories_is_parity() -> None:
    parity = compare(expected(), {"d"}, held("abc"), held("abc", sync=None), {"d"})

    assert parity.ok and (parity.lost, parity.duplicated, parity.stale) == (0, 0, 0)


def test_a_memory_missing_from_either_store_is_lost_and_an_extra_point_duplicated() -> None:
    parity = compare(expected(), {"d"}, held("ab"), held("acx"), {"d"})

    assert (parity.lost, parity.duplicated) == (2, 1)
    assert (parity.missing_neo4j, parity.missing_qdrant, parity.extra_qdrant) == (1, 1, 1)
    assert not parity.ok


def test_other_content_or_an_older_version_is_stale_and_counts_as_lost() -> None:
    points = held("abc", version=2)
    points["b"] = Stored("b", "hash-old", 2)
    points["c"] = Stored("c", "hash-c", 1)

    parity = compare(expected(version=2), {"d"}, held("abc", version=2), points, {"d"})

    assert (parity.lost, parity.stale, parity.duplicated) == (2, 2, 0)


def test_pending_memories_and_extra_documents_break_parity() -> None:
    memories = held("abc")
    memories["a"] = Stored("a", "hash-a", None, "pending")

    parity = compare(expected(), {"d"}, memories, held("abc"), {"d", "e"})

    assert (parity.unsynced, parity.extra_documents, parity.duplicated) == (1, 1, 1)
    assert not parity.ok
