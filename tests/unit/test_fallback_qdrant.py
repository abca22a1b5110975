"""The fallback's search on each real embedded engine (local mode and Qdrant Edge, a tmp folder):
every filter works.

These are the engines the fallback searches when no server is configured; their filter support
is not the server's, so each filter Neo4j applies is tried here on the real thing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.models import Memory, SearchFilters
from shared.search.sources import NearestMemories
from shared.stores.base import VectorPoint
from tests.unit.vector_engines import ENGINES, connect

MEMORIES: list[dict[str, Any]] = [
    # id, tenant, project, session, document, type, tags, created_at, vector
    {"n": 1, "user": "alice", "project": "p1", "session": "s1", "doc": "d1", "type": "fact", "tags": ["a", "b"], "at": "2021-01-01T00:00:00Z", "v": [1.0, 0.0, 0.0]},
    {"n": 2, "user": "alice", "project": "p1", "session": "s2", "doc": "d2", "type": "note", "tags": ["b"], "at": "2022-06-01T00:00:00Z", "v": [0.8, 0.6, 0.0]},
    {"n": 3, "user": "alice", "project": "p2", "session": "s1", "doc": "d3", "type": "fact", "tags": [], "at": "2023-06-01T12:30:00+00:00", "v": [0.0, 1.0, 0.0]},
    {"n": 4, "user": "alice", "project": None, "session": None, "doc": "d4", "type": "document", "tags": ["c"], "at": "2024-12-31T23:59:59Z", "v": [0.0, 0.0, 1.0]},
    {"n": 5, "user": "bob", "project": "p1", "session": "s1", "doc": "d1", "type": "fact", "tags": ["a"], "at": "2021-01-01T00:00:00Z", "v": [1.0, 0.0, 0.0]},
]  # fmt: skip


def point_id(n: int) -> str:
    return f"00000000-0000-0000-0000-{n:012d}"


def payload(spec: dict[str, Any]) -> dict[str, Any]:
    return Memory(
        id=point_id(spec["n"]),
        document_key=f"{spec['user']}:{spec['doc']}",
        document_id=spec["doc"],
        user_id=spec["user"],
        chunk_index=0,
        content=f"memory {spec['n']}",
        key=f"key-{spec['n']}",
        content_hash=f"hash-{spec['n']}",
        token_count=2,
        memory_type=spec["type"],
        project_id=spec["project"],
        session_id=spec["session"],
        tags=spec["tags"],
        status="archived" if spec["n"] == 3 else "active",
        created_at=spec["at"],
        version=1,
        embedding_model="test-model",
        embedding_dim=3,
    ).payload()


@pytest.fixture(scope="module", params=ENGINES)
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    folder: Path = tmp_path_factory.mktemp("qdrant")
    connection = connect(request.param, folder)
    vectors = connection.store("test-model", 3)
    vectors.upsert([VectorPoint(point_id(m["n"]), m["v"], 1, payload(m)) for m in MEMORIES])
    yield vectors
    connection.close()


def found(
    store: NearestMemories, user_id: str = "alice", vector: list[float] | None = None, **filters: Any
) -> list[int]:
    hits = store.search(vector or [1.0, 0.0, 0.0], user_id, SearchFilters.model_validate(filters), limit=10)
    return [int(payload["id"][-12:]) for payload, _ in hits]


def test_the_tenant_is_always_applied(store: NearestMemories) -> None:
    assert sorted(found(store)) == [1, 2, 3, 4]
    assert found(store, user_id="bob") == [5]
    assert found(store, user_id="carol") == []


def test_hits_come_best_first_scored_in_cosine_with_the_memory_as_payload(store: NearestMemories) -> None:
    hits = store.search([1.0, 0.0, 0.0], "alice", SearchFilters(), limit=2)

    assert [(int(p["id"][-12:]), round(score, 4)) for p, score in hits] == [(1, 1.0), (2, 0.8)]
    assert Memory.model_validate(hits[0][0]).created_at.year == 2021


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"project_id": "p1"}, [1, 2]),
        ({"session_id": "s1"}, [1, 3]),
        ({"document_id": "d3"}, [3]),
        ({"memory_types": ["note", "document"]}, [2, 4]),
        ({"tags": ["b"]}, [1, 2]),
        ({"statuses": ["archived"]}, [3]),
        ({"statuses": ["active"]}, [1, 2, 4]),
        ({"tags": ["a", "c"]}, [1, 4]),  # any of them
        ({"from_date": "2022-06-01T00:00:00Z"}, [2, 3, 4]),  # inclusive
        ({"to_date": "2022-06-01T00:00:00Z"}, [1, 2]),  # inclusive
        ({"from_date": "2022-01-01T00:00:00Z", "to_date": "2023-12-31T00:00:00Z"}, [2, 3]),
        ({"from_date": "2023-06-01T14:30:00+02:00", "to_date": "2023-06-01T12:30:00Z"}, [3]),  # zones
        ({"from_date": "2999-01-01T00:00:00Z"}, []),
        ({"project_id": "p1", "memory_types": ["fact"], "tags": ["a"]}, [1]),  # all together
    ],
)
def test_each_filter_applies_as_in_neo4j(
    store: NearestMemories, filters: dict[str, Any], expected: list[int]
) -> None:
    assert sorted(found(store, **filters)) == expected
