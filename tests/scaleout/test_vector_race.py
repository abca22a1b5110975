"""Two write workers in two processes race versions of the same documents on one Qdrant server,
each through its own connection and the adapter's version-guarded writes and deletes, as two
write workers on two hosts would: an older version never overwrites a newer one.

Hypothesis draws the histories: for each document a run of versions, each written or deleted by
one of the two workers; each worker sends its own share in version order (what it read from the
primary only moves forward), so the two interleave however the server takes them.

A delete is not undone by the adapter alone: Qdrant keeps no tombstone, so a worker's older write
that lands after the other's delete finds no point to be guarded by and makes one (hypothesis's
smallest case: worker 0 writes v1, worker 1 deletes at v2, the delete lands first). The write
worker closes that window above the adapter: ``Syncer`` (shared/services/sync.py) reads the
primary again after its write, finds the Memory tombstoned or gone, and deletes its point; a
worker that dies in between leaves an orphan the reconciler's sweep deletes. Here the adapter's
part is held: such a point is only ever an older write, never the deleted version or a newer one.
"""

from __future__ import annotations

import multiprocessing
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.pool import Pool
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.settings import Settings
from shared.stores.base import VectorConnection, VectorPoint
from shared.stores.vectors import connect_vectors
from tests.scaleout.qdrant_server import QdrantServer

pytestmark = pytest.mark.integration

MODEL, DIM = "race-model", 4
DOCUMENTS = 6
WORKERS = 2


@dataclass(frozen=True)
class Step:
    document: int
    version: int
    delete: bool
    worker: int


def pid(base: int, document: int) -> str:
    return str(uuid.UUID(int=base + document))


def _point(base: int, document: int, version: int) -> VectorPoint:
    payload = {"id": pid(base, document), "user_id": "racer", "content_hash": f"{document}-{version}"}
    return VectorPoint(pid(base, document), [1.0, float(version), float(document), 0.5], version, payload)


_connections: dict[str, VectorConnection] = {}


def _run(settings: dict[str, Any], base: int, steps: list[tuple[int, int, bool]]) -> float:
    """One worker's share, in its process: each step one request, as a sync batch of one."""
    prefix = settings["qdrant_collection_prefix"]
    if prefix not in _connections:
        _connections.clear()
        _connections[prefix] = connect_vectors(Settings(**settings))
    store = _connections[prefix].store(MODEL, DIM)
    started = time.monotonic()
    for document, version, delete in steps:
        if delete:
            store.delete({pid(base, document): version})
        else:
            store.upsert([_point(base, document, version)])
    return time.monotonic() - started


@st.composite
def histories(draw: st.DrawFn) -> list[Step]:
    steps: list[Step] = []
    for document in range(DOCUMENTS):
        versions = draw(st.lists(st.integers(1, 30), min_size=1, max_size=8, unique=True))
        for version in sorted(versions):
            delete = draw(st.booleans()) if version == max(versions) else draw(st.integers(0, 4)) == 0
            steps.append(Step(document, version, delete, draw(st.integers(0, WORKERS - 1))))
    return steps


@dataclass
class Race:
    """The two worker processes, and the collection they race on (one for every example; each
    example's documents have ids of their own)."""

    pool: Pool
    fields: dict[str, Any]
    connection: VectorConnection
    examples: int = 0
    undone: int = 0  # deleted documents an older write landed on after the delete (see above)


@pytest.fixture(scope="module")
def race(qdrant_server: QdrantServer) -> Iterator[Race]:
    settings = qdrant_server.settings()
    fields = {
        "qdrant_url": settings.qdrant_url,
        "qdrant_api_key": settings.qdrant_api_key,
        "qdrant_collection_prefix": settings.qdrant_collection_prefix,
    }
    connection = connect_vectors(settings)
    with multiprocessing.get_context("spawn").Pool(WORKERS) as pool:
        yield Race(pool, fields, connection)
    connection.drop(MODEL, DIM)
    connection.close()


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(history=histories())
def test_an_older_version_never_overwrites_a_newer_one(race: Race, history: list[Step]) -> None:
    # Given documents of this example's own, each step given to one of the two workers
    race.examples += 1
    base = race.examples * 1000
    in_order = sorted(history, key=lambda s: (s.version, s.document))
    shares = [[(s.document, s.version, s.delete) for s in in_order if s.worker == w] for w in range(WORKERS)]

    # When the two workers send their shares at once, each from its own process and connection
    runs = [race.pool.apply_async(_run, (race.fields, base, share)) for share in shares]
    for run in runs:
        run.get(timeout=120)

    # Then a document whose newest version was written holds that version, whatever came after it;
    # a deleted one holds nothing the delete could see: at most an older write that landed after it
    states = race.connection.store(MODEL, DIM).states([pid(base, d) for d in range(DOCUMENTS)])
    for document in range(DOCUMENTS):
        own = [s for s in history if s.document == document]
        newest = max(own, key=lambda s: s.version)
        found = states.get(pid(base, document))
        if not newest.delete:
            assert found is not None and found.version == newest.version, (document, own, found)
        elif found is not None:
            race.undone += 1
            written = {s.version for s in own if not s.delete}
            assert found.version in written and found.version < newest.version, (document, own, found)
            assert found.content_hash == f"{document}-{found.version}"
