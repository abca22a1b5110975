"""Fault row: a write worker killed (SIGKILL) between its write to the Qdrant server and its read
of the primary after it, while the other worker deletes the document. Its older write lands after
the delete and re-creates the point (the server keeps no tombstone); nothing is left to take it
back but the reconciler, whose sweep finds a point with no live Memory and deletes it.

The primary is tests/scaleout/race_primary.py's (shared by the processes); the worker, the sync
and the sweep are Engram's own (``Syncer``, ``DriftSweep``) on a real server.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Sequence
from typing import Any, cast

import pytest

from shared.services.drift import DriftSweep
from shared.services.sweep import SweepCursor
from shared.settings import Settings
from shared.stores.base import GraphStore, VectorPoint, VectorStore
from shared.stores.vectors import connect_vectors
from tests.scaleout.qdrant_server import QdrantServer
from tests.scaleout.race_primary import DIM, MODEL, RacePrimary, pid

pytestmark = pytest.mark.integration

BASE = 1000


class _DiesAfterItsWrite:
    """A store whose upsert waits until the other worker's delete is done, lands, and kills its
    process before the sync reads the primary again."""

    def __init__(self, store: VectorStore, reading: Any, deleted: Any) -> None:
        self._store = store
        self._reading = reading
        self._deleted = deleted

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        self._reading.set()
        assert self._deleted.wait(60)
        self._store.upsert(points)
        os.kill(os.getpid(), signal.SIGKILL)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def _doomed_worker(fields: dict[str, Any], primary: RacePrimary, reading: Any, deleted: Any) -> None:
    connection = connect_vectors(Settings(**fields))
    syncer = primary.syncer(lambda m, d: _DiesAfterItsWrite(connection.store(m, d), reading, deleted))
    primary.commit(BASE, 0, 1, False)
    syncer.sync([pid(BASE, 0)])


def test_a_delete_undone_by_a_killed_workers_older_write_is_swept_by_the_reconciler(
    qdrant_server: QdrantServer,
) -> None:
    settings = qdrant_server.settings()
    fields = {k: getattr(settings, k) for k in ("qdrant_url", "qdrant_api_key", "qdrant_collection_prefix")}
    connection = connect_vectors(settings)
    store = connection.store(MODEL, DIM)
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        primary = RacePrimary(manager.dict(), manager.Lock())
        syncer = primary.syncer(connection.store)
        reading, deleted = manager.Event(), manager.Event()
        # Given a live document beside the one the race is on
        primary.commit(BASE, 1, 3, False)
        assert syncer.sync([pid(BASE, 1)]).synced == 1

        # When a worker reads document 0 at v1 and, before its write lands, the other worker
        # commits and syncs its delete at v2; then the first worker's write lands and it is killed
        doomed = context.Process(target=_doomed_worker, args=(fields, primary, reading, deleted))
        doomed.start()
        assert reading.wait(60)
        primary.commit(BASE, 0, 2, True)
        assert syncer.sync([pid(BASE, 0)]).deleted == 1
        deleted.set()
        doomed.join(60)
        assert doomed.exitcode == -signal.SIGKILL

        # Then the delete is undone on the server: the killed worker's v1 is there, no Memory has it
        undone = store.states([pid(BASE, 0)])
        assert undone[pid(BASE, 0)].version == 1
        assert primary.live_versions([pid(BASE, 0)]) == {}

        # When the reconciler's sweep passes
        sweep = DriftSweep(
            cast(GraphStore, primary),
            connection.store,
            syncer,
            page=100,
            batch=100,
            max_delete_share=0.5,
            mass_delete_min=10,
        )
        outcome = sweep.run(SweepCursor(), None, {}, primary_lost=False, dry_run=False, force=False)

    # Then the orphan is deleted, and only it
    assert (outcome.found.orphan_points, outcome.fixed.orphan_points, outcome.error) == (1, 1, None)
    assert set(store.states([pid(BASE, 0), pid(BASE, 1)])) == {pid(BASE, 1)}
    assert store.count() == 1
    connection.drop(MODEL, DIM)
    connection.close()
