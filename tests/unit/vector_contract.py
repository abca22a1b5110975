"""The vector adapter contract: versioned writes and deletes, the reconciler's scroll, the
restore's reads, identity, models and errors, as the stage services rely on them (see
``VectorStore`` in shared/stores/base.py).

One suite for every backend: a test module subclasses ``VectorAdapterContract`` and gives it an
``opened`` fixture (tests/unit/test_vector_adapters.py: the embedded engines in a tmp folder;
tests/integration/test_vector_adapters_server.py: a real Qdrant server, a collection prefix per
test).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from shared.errors import VectorStoreRejected
from shared.stores.base import VectorPoint

MODEL, DIM = "test-model", 4


def pid(n: int) -> str:
    return str(uuid.UUID(int=n))


def point(n: int, version: int, *, user: str = "alice", content: str | None = None) -> VectorPoint:
    vector = [float(n % 7 + 1), 1.0, float(n % 3), 0.5]
    payload = {
        "id": pid(n),
        "user_id": user,
        "content": content or f"memory {n} v{version}",
        "content_hash": f"hash-{n}-{version}",
        "embedding_model": MODEL,
        "embedding_dim": DIM,
    }
    return VectorPoint(pid(n), vector, version, payload)


def unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector]


class Opened:
    """A connection made by ``connect`` (a ``VectorConnection``) and its store of the test model;
    ``reopen`` closes it and connects again to the same data."""

    def __init__(self, connect: Callable[[], Any]) -> None:
        self._connect = connect
        self.connection = connect()
        self.store = self.connection.store(MODEL, DIM)

    def reopen(self) -> None:
        self.connection.close()
        self.connection = self._connect()
        self.store = self.connection.store(MODEL, DIM)

    def versions(self) -> dict[int, int | None]:
        states = self.store.states([pid(n) for n in range(1, 40)])
        return {int(uuid.UUID(i).int): s.version for i, s in states.items()}


class VectorAdapterContract:
    """What every vector backend must do alike (not collected itself: its name is no ``Test``)."""

    def test_a_point_is_written_with_its_version_and_read_back_whole(self, opened: Opened) -> None:
        opened.store.upsert([point(1, 5), point(2, 5)])

        [read] = opened.store.retrieve([pid(1), pid(99)])  # an absent id is left out
        assert read.id == pid(1) and read.version == 5
        assert read.payload["content"] == "memory 1 v5" and read.payload["version"] == 5
        assert unit(read.vector) == pytest.approx(unit(point(1, 5).vector), rel=1e-5)  # cosine: its direction
        states = opened.store.states([pid(1), pid(2), pid(3)])
        assert set(states) == {pid(1), pid(2)}
        assert (states[pid(1)].version, states[pid(1)].content_hash, states[pid(1)].embedding_model) == (
            5,
            "hash-1-5",
            MODEL,
        )

    def test_an_older_write_after_a_newer_one_is_a_no_op(self, opened: Opened) -> None:
        # Given version 2 of point 1
        opened.store.upsert([point(1, 2)])

        # When version 1 arrives late, and version 3 of point 2 arrives with version 1 of point 3
        opened.store.upsert([point(1, 1), point(2, 3), point(3, 1)])

        # Then point 1 keeps version 2; the new points are written
        assert opened.versions() == {1: 2, 2: 3, 3: 1}
        assert opened.store.retrieve([pid(1)])[0].payload["content"] == "memory 1 v2"

    def test_the_same_or_a_newer_version_replaces_the_point(self, opened: Opened) -> None:
        opened.store.upsert([point(1, 2)])

        opened.store.upsert([point(1, 2, content="rewritten")])
        assert opened.store.retrieve([pid(1)])[0].payload["content"] == "rewritten"

        opened.store.upsert([point(1, 7)])
        assert opened.versions() == {1: 7}

    def test_a_delete_takes_points_not_newer_than_its_version_only(self, opened: Opened) -> None:
        opened.store.upsert([point(1, 2), point(2, 5), point(3, 1)])

        opened.store.delete({pid(1): 2, pid(2): 4, pid(3): 9, pid(4): 1})  # 4 is absent: nothing to do

        assert opened.versions() == {2: 5}
        assert opened.store.count() == 1

    def test_scroll_pages_every_point_once_in_id_order(self, opened: Opened) -> None:
        opened.store.upsert([point(n, 1) for n in range(1, 24)])

        seen: list[str] = []
        after: str | None = None
        pages = 0
        while True:
            page, after = opened.store.scroll(after, 5)
            seen.extend(s.id for s in page)
            pages += 1
            if after is None:
                break

        assert seen == sorted(seen, key=lambda i: uuid.UUID(i).int) == [pid(n) for n in range(1, 24)]
        assert pages == 5
        assert opened.store.count() == 23

    def test_scroll_payloads_reads_the_fields_asked_of_one_tenant(self, opened: Opened) -> None:
        opened.store.upsert([point(n, 1, user="alice" if n % 2 else "bob") for n in range(1, 11)])

        rows, after = opened.store.scroll_payloads(None, 100, ["content", "user_id"], user_id="bob")

        assert after is None
        assert [r[0] for r in rows] == [pid(n) for n in (2, 4, 6, 8, 10)]
        assert all(
            set(payload) == {"content", "user_id"} and payload["user_id"] == "bob" for _, payload in rows
        )
        everyone, _ = opened.store.scroll_payloads(None, 100, ["user_id"])
        assert len(everyone) == 10

    def test_the_primarys_identity_is_stamped_and_kept_across_a_reopen(self, opened: Opened) -> None:
        opened.store.upsert([point(1, 1)])
        assert opened.store.identity() is None

        opened.store.stamp("store-a")
        opened.store.stamp("store-b")
        opened.reopen()

        assert opened.store.identity() == "store-b"
        assert opened.versions() == {1: 1}

    def test_models_dimensions_and_drop_see_each_models_collection(self, opened: Opened) -> None:
        opened.store.upsert([point(1, 1)])
        other = opened.connection.store("other-model", 2)
        other.upsert(
            [VectorPoint(pid(5), [1.0, 0.0], 1, {"embedding_model": "other-model", "embedding_dim": 2})]
        )

        assert opened.connection.models() == [("other-model", 2), (MODEL, DIM)]
        assert opened.connection.dimensions_of(MODEL) == [DIM]

        assert opened.connection.drop("other-model", 2) is True
        assert opened.connection.drop("other-model", 2) is False
        assert opened.connection.models() == [(MODEL, DIM)]

    def test_a_vector_of_another_size_is_refused_as_permanent(self, opened: Opened) -> None:
        bad = VectorPoint(pid(1), [1.0, 0.0], 1, {"user_id": "alice"})

        with pytest.raises(VectorStoreRejected):
            opened.store.upsert([bad])
        opened.store.upsert([point(2, 1)])  # the store still takes good points
        assert opened.store.count() == 1
