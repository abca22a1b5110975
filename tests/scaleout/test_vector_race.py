"""Two write workers in two processes race versions of the same documents on one Qdrant server,
each through its own connection, as two write workers on two hosts would: an older version never
overwrites a newer one, and a delete is never undone.

Hypothesis draws the histories: for each document a run of versions, each written or deleted by
one of the two workers; each worker commits its own share to the primary in version order and
syncs each step through the write stage's ``Syncer`` (shared/services/sync.py), so the two
interleave however the server takes them.

The adapter alone does not keep a delete: Qdrant keeps no tombstone, so an older write that lands
after the other worker's delete finds no point to be guarded by and makes one (hypothesis's
smallest case: worker 0 reads v1, worker 1 deletes at v2, worker 0's write lands last). The
closure is above the adapter, and it is what this test holds: the ``Syncer`` marks a Memory synced
only if the primary still holds the version it wrote, reads the primary again when it does not,
finds it deleted (a tombstone, or no row at all once the other worker forgot it) and deletes its
own point. A worker killed between its write and that read leaves an orphan the reconciler's
sweep deletes: the fault row in test_delete_fault.py.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.managers import SyncManager
from multiprocessing.pool import Pool
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.settings import Settings
from shared.stores.base import VectorConnection
from shared.stores.vectors import connect_vectors
from tests.scaleout.qdrant_server import QdrantServer
from tests.scaleout.race_primary import DIM, MODEL, RacePrimary, content_hash, pid

pytestmark = pytest.mark.integration

DOCUMENTS = 6
WORKERS = 2


@dataclass(frozen=True)
class Step:
    document: int
    version: int
    delete: bool
    worker: int


_connections: dict[str, VectorConnection] = {}


def _run(
    settings: dict[str, Any], primary: RacePrimary, base: int, steps: list[tuple[int, int, bool]]
) -> int:
    """One worker's share, in its process: each step committed to the primary, then synced as a
    sync task of one id. Returns how many of its writes' syncs took a point back (a delete seen
    on the read after the write: the undo that would have been)."""
    prefix = settings["qdrant_collection_prefix"]
    if prefix not in _connections:
        _connections.clear()
        _connections[prefix] = connect_vectors(Settings(**settings))
    connection = _connections[prefix]
    syncer = primary.syncer(connection.store)
    taken_back = 0
    for document, version, delete in steps:
        primary.commit(base, document, version, delete)
        outcome = syncer.sync([pid(base, document)])
        assert outcome.error is None, outcome.error
        taken_back += int(not delete and outcome.deleted > 0)
    return taken_back


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
    """The two worker processes, the primary they share, and the collection they race on (one
    for every example; each example's documents have ids of their own)."""

    pool: Pool
    primary: RacePrimary
    fields: dict[str, Any]
    connection: VectorConnection
    examples: int = 0
    taken_back: int = 0


@pytest.fixture(scope="module")
def race(qdrant_server: QdrantServer) -> Iterator[Race]:
    settings = qdrant_server.settings()
    fields = {
        "qdrant_url": settings.qdrant_url,
        "qdrant_api_key": settings.qdrant_api_key,
        "qdrant_collection_prefix": settings.qdrant_collection_prefix,
    }
    connection = connect_vectors(settings)
    context = multiprocessing.get_context("spawn")
    manager: SyncManager = context.Manager()
    with manager, context.Pool(WORKERS) as pool:
        primary = RacePrimary(manager.dict(), manager.Lock())
        yield Race(pool, primary, fields, connection)
    connection.drop(MODEL, DIM)
    connection.close()


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(history=histories())
def test_an_older_version_never_overwrites_a_newer_one_nor_undoes_a_delete(
    race: Race, history: list[Step]
) -> None:
    # Given documents of this example's own, each step given to one of the two workers
    race.examples += 1
    base = race.examples * 1000
    in_order = sorted(history, key=lambda s: (s.version, s.document))
    shares = [[(s.document, s.version, s.delete) for s in in_order if s.worker == w] for w in range(WORKERS)]

    # When the two workers commit and sync their shares at once, each from its own process
    runs = [race.pool.apply_async(_run, (race.fields, race.primary, base, share)) for share in shares]
    race.taken_back += sum(run.get(timeout=120) for run in runs)

    # Then, once both have settled, a document whose newest step is a write holds that version,
    # and one whose newest step is a delete has no point, whatever the order the server took them
    states = race.connection.store(MODEL, DIM).states([pid(base, d) for d in range(DOCUMENTS)])
    for document in range(DOCUMENTS):
        own = [s for s in history if s.document == document]
        newest = max(own, key=lambda s: s.version)
        found = states.get(pid(base, document))
        if newest.delete:
            assert found is None, (document, own, found)
        else:
            assert found is not None and found.version == newest.version, (document, own, found)
            assert found.content_hash == content_hash(document, newest.version)
