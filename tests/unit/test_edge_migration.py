"""The upgrade of an embedded folder from qdrant-client's local mode to Qdrant Edge, on the real
engines: everything comes over with its versions and the primary's stamp, the local folder is
left in place, a second start copies nothing, a stopped copy resumes where it stopped, and a point
written newer in Edge meanwhile is not overwritten."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from shared.settings import Settings
from shared.stores.base import VectorPoint
from shared.stores.qdrant import QdrantConnection
from shared.stores.qdrant_edge import EdgeConnection
from shared.stores.qdrant_edge_migration import MARKER
from shared.stores.vectors import connect_vectors
from tests.unit.vector_engines import connect, engine_settings

MODEL, DIM = "test-model", 4


def pid(n: int) -> str:
    return str(uuid.UUID(int=n))


def point(n: int, version: int, dim: int = DIM) -> VectorPoint:
    payload = {"id": pid(n), "user_id": "alice", "content": f"m{n} v{version}", "embedding_model": MODEL}
    return VectorPoint(pid(n), [1.0, float(n)] + [0.5] * (dim - 2), version, payload)


def local_folder(folder: Path, points: list[VectorPoint], stamp: str | None = "store-a") -> None:
    connection = connect("local", folder)
    store = connection.store(MODEL, DIM)
    store.upsert(points)
    if stamp:
        store.stamp(stamp)
    connection.close()


def edge_of(folder: Path) -> EdgeConnection:
    """Edge as the composition root opens it: with the local-mode folder to copy from."""
    connection = connect_vectors(engine_settings("edge", folder))
    assert isinstance(connection, EdgeConnection)
    return connection


def test_a_local_folder_comes_over_whole_on_first_use_and_stays_in_place(tmp_path: Path) -> None:
    # Given a local-mode folder of 30 points at versions 1-3, stamped by the primary
    local_folder(tmp_path, [point(n, n % 3 + 1) for n in range(1, 31)])

    # When Edge is first used
    edge = edge_of(tmp_path)
    store = edge.store(MODEL, DIM)
    try:
        # Then it holds every point at its version, with its payload and the stamp
        assert store.count() == 30
        states = store.states([pid(n) for n in range(1, 31)])
        assert {i: s.version for i, s in states.items()} == {pid(n): n % 3 + 1 for n in range(1, 31)}
        assert store.retrieve([pid(7)])[0].payload["content"] == "m7 v2"
        assert store.identity() == "store-a"
        assert edge.models() == []  # these test points carry no embedding_dim: no model is claimed
    finally:
        edge.close()

    # And the local folder is still there, readable, with its 30 points
    local = connect("local", tmp_path)
    assert local.store(MODEL, DIM).count() == 30
    local.close()
    assert json.loads((tmp_path / "qdrant-edge" / MARKER).read_text())["done_at"]


def test_a_second_start_copies_nothing_and_newer_edge_points_are_kept(tmp_path: Path) -> None:
    local_folder(tmp_path, [point(n, 1) for n in range(1, 6)])
    edge = edge_of(tmp_path)
    edge.store(MODEL, DIM).upsert([point(2, 9)])  # the first use copies; then the pipeline writes v9
    edge.close()

    again = edge_of(tmp_path)
    try:
        report = again.migrate()
        assert report is not None and report.already_done and report.copied == {}
        states = again.store(MODEL, DIM).states([pid(n) for n in range(1, 6)])
        assert {i: s.version for i, s in states.items()} == {
            pid(1): 1,
            pid(2): 9,
            pid(3): 1,
            pid(4): 1,
            pid(5): 1,
        }
    finally:
        again.close()


def test_a_copy_stopped_midway_resumes_after_the_last_page_recorded(tmp_path: Path) -> None:
    # Given 20 local points, and a copy that stopped after recording two pages of 5
    local_folder(tmp_path, [point(n, 1) for n in range(1, 21)])
    local = connect("local", tmp_path)
    name = local.store(MODEL, DIM).collection
    local.close()
    marker = tmp_path / "qdrant-edge" / MARKER
    marker.parent.mkdir()
    marker.write_text(json.dumps({"collections": {name: {"next": pid(11), "copied": 10}}}))
    edge = edge_of(tmp_path)

    # When the copy runs again
    try:
        report = edge.migrate(page=5)

        # Then it copies from the page recorded on (points 11-20), no more, and is done
        assert report is not None and report.done and report.copied == {name: 10}
        store = edge.store(MODEL, DIM)
        assert store.count() == 10
        assert sorted(store.states([pid(n) for n in range(1, 21)])) == [pid(n) for n in range(11, 21)]
        recorded = json.loads(marker.read_text())
        assert recorded["collections"][name] == {"next": None, "copied": 20, "done": True}
        assert recorded["done_at"]
    finally:
        edge.close()


def test_an_installation_of_the_old_local_mode_default_keeps_its_backup_on_upgrade(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a data folder written by the embedded default before Edge (local mode at
    # data_dir/qdrant), and no path or server named anywhere
    for name in (
        "ENGRAM_QDRANT_ENGINE",
        "ENGRAM_QDRANT_PATH",
        "ENGRAM_QDRANT_EDGE_PATH",
        "ENGRAM_QDRANT_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    before = connect_vectors(Settings(_env_file=None, data_dir=tmp_path, qdrant_engine="local"))
    assert isinstance(before, QdrantConnection)
    before.store(MODEL, DIM).upsert([point(n, 2) for n in range(1, 11)])
    before.store(MODEL, DIM).stamp("store-a")
    before.close()

    # When the upgrade's default engine (Edge) opens it, nothing else said
    connection = connect_vectors(Settings(_env_file=None, data_dir=tmp_path))
    try:
        # Then its first use copies the folder into data_dir/qdrant-edge: every point at its
        # version, and the primary's stamp
        assert isinstance(connection, EdgeConnection)
        store = connection.store(MODEL, DIM)
        assert store.count() == 10
        assert {s.version for s in store.states([pid(n) for n in range(1, 11)]).values()} == {2}
        assert store.identity() == "store-a"
    finally:
        connection.close()
    assert (tmp_path / "qdrant-edge" / store.collection / "edge_config.json").exists()
    assert json.loads((tmp_path / "qdrant-edge" / MARKER).read_text())["done_at"]
