"""Do Neo4j and the Qdrant backup hold exactly the Memories a tenant should have?

Reading an embedded backup means opening its folder, which only one process may do: the check
pauses the write worker (its owner) for the read, as tests/integration/support.py's qdrant_reader
does, and reads it through the adapter of the configured engine (local mode or Edge). A Qdrant
server is read while the workers run.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass
from typing import Any

import neo4j

from shared.ids import document_key
from shared.stores.base import VectorStore
from tests.faults.corpus import ExpectedMemory
from tests.faults.stack import FaultStack


@dataclass(frozen=True, slots=True)
class Stored:
    """A Memory as one store holds it."""

    id: str
    content_hash: str | None
    version: int | None
    vector_sync: str | None = None  # Neo4j only


@dataclass(frozen=True, slots=True)
class Parity:
    expected: int
    lost: int  # expected Memories missing, or held with other content or version, in either store
    stale: int  # of the lost: present in both stores, but not as expected
    duplicated: int  # Memories or Documents beyond the expected ones
    unsynced: int  # expected Memories in Neo4j whose vector_sync is not "synced"
    missing_neo4j: int
    missing_qdrant: int
    extra_neo4j: int
    extra_qdrant: int
    missing_documents: int
    extra_documents: int

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.unsynced or self.missing_documents)

    def describe(self) -> str:
        parts = [
            f"neo4j -{self.missing_neo4j}/+{self.extra_neo4j}",
            f"qdrant -{self.missing_qdrant}/+{self.extra_qdrant}",
        ]
        if self.stale:
            parts.append(f"stale {self.stale}")
        if self.unsynced:
            parts.append(f"unsynced {self.unsynced}")
        if self.missing_documents or self.extra_documents:
            parts.append(f"documents -{self.missing_documents}/+{self.extra_documents}")
        return ", ".join(parts)


def _holds(stored: Stored | None, expected: ExpectedMemory) -> bool:
    if stored is None or stored.content_hash != expected.content_hash:
        return False
    return expected.version is None or stored.version == expected.version


def compare(
    expected: Mapping[str, ExpectedMemory],
    expected_documents: Set[str],
    neo4j_memories: Mapping[str, Stored],
    qdrant_points: Mapping[str, Stored],
    documents: Set[str],
) -> Parity:
    """Pure comparison of what the stores hold with what they should (ids are Neo4j ids)."""
    lost = {
        mid
        for mid, memory in expected.items()
        if not (_holds(neo4j_memories.get(mid), memory) and _holds(qdrant_points.get(mid), memory))
    }
    extra_neo4j = set(neo4j_memories) - set(expected)
    extra_qdrant = set(qdrant_points) - set(expected)
    extra_documents = documents - expected_documents
    return Parity(
        expected=len(expected),
        lost=len(lost),
        stale=len({mid for mid in lost if mid in neo4j_memories and mid in qdrant_points}),
        duplicated=len(extra_neo4j | extra_qdrant) + len(extra_documents),
        unsynced=sum(
            1 for mid in expected if mid in neo4j_memories and neo4j_memories[mid].vector_sync != "synced"
        ),
        missing_neo4j=len(set(expected) - set(neo4j_memories)),
        missing_qdrant=len(set(expected) - set(qdrant_points)),
        extra_neo4j=len(extra_neo4j),
        extra_qdrant=len(extra_qdrant),
        missing_documents=len(expected_documents - documents),
        extra_documents=len(extra_documents),
    )


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) else None


def read_neo4j(driver: neo4j.Driver, user_id: str) -> tuple[dict[str, Stored], set[str]]:
    """A tenant's Memories and Document ids."""
    records, _, _ = driver.execute_query(
        "MATCH (m:Memory {user_id: $u}) "
        "RETURN m.id AS id, m.content_hash AS hash, m.version AS version, m.vector_sync AS sync",
        u=user_id,
    )
    memories = {r["id"]: Stored(r["id"], r["hash"], _int(r["version"]), r["sync"]) for r in records}
    records, _, _ = driver.execute_query("MATCH (d:Document {user_id: $u}) RETURN d.id AS id", u=user_id)
    return memories, {r["id"] for r in records}


def read_qdrant(store: VectorStore | None, user_id: str) -> dict[str, Stored]:
    """A tenant's points, paged through with a scroll (none when there is no collection)."""
    points: dict[str, Stored] = {}
    if store is None:
        return points
    offset: str | None = None
    while True:
        page, offset = store.scroll_payloads(offset, 1000, ["content_hash", "version"], user_id)
        for point_id, payload in page:
            points[point_id] = Stored(point_id, payload.get("content_hash"), _int(payload.get("version")))
        if offset is None:
            return points


def check(
    stack: FaultStack, user_id: str, expected: Mapping[str, ExpectedMemory], document_ids: list[str]
) -> Parity:
    """Reads both stores (pausing the write worker for Qdrant) and compares them with the expectation."""
    memories, documents = read_neo4j(stack.neo4j, user_id)
    if stack.qdrant is not None:  # a server is read while the workers run
        with stack.backup() as store:
            points = read_qdrant(store, user_id)
    else:
        stack.stop_worker("write", warm=True)
        try:
            with stack.backup() as store:
                points = read_qdrant(store, user_id)
        finally:
            stack.start_worker("write")
    expected_documents = {document_key(user_id, d) for d in document_ids}
    return compare(expected, expected_documents, memories, points, documents)
