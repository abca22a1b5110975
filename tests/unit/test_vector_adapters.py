"""The vector adapter contract (tests/unit/vector_contract.py) on the embedded engines, local
mode and Qdrant Edge, each real and in a tmp folder; then what only an embedded folder does: one
owning process, and a held folder copied whole as `engram backup --qdrant` copies it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.vector_contract import DIM, MODEL, Opened, VectorAdapterContract, pid, point
from tests.unit.vector_engines import ENGINES, Engine, connect


class Embedded(Opened):
    def __init__(self, engine: Engine, folder: Path) -> None:
        self.engine, self.folder = engine, folder
        super().__init__(lambda: connect(engine, folder))


@pytest.fixture(params=ENGINES)
def opened(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Embedded]:
    found = Embedded(request.param, tmp_path)
    yield found
    found.connection.close()


class TestEmbedded(VectorAdapterContract):
    """The contract on local mode and on Qdrant Edge."""


SECOND = """
import sys
from pathlib import Path
from shared.errors import ServiceUnavailable
from tests.unit.vector_engines import connect
try:
    connect(sys.argv[1], Path(sys.argv[2])).store("test-model", 4).count()
except ServiceUnavailable as exc:
    print(exc.service, "|", exc)
else:
    print("opened")
"""


def test_a_second_process_is_refused_the_folder_with_a_clear_error(opened: Embedded) -> None:
    # Given this process holds the folder
    opened.store.upsert([point(1, 1)])

    # When another process opens it
    second = subprocess.run(
        [sys.executable, "-c", SECOND, opened.engine, str(opened.folder)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
        check=True,
    )

    # Then it is refused as a service unavailable, naming the way out; this process goes on
    service, message = second.stdout.strip().split(" | ", 1)
    assert service == "qdrant"
    assert "let one worker own the embedded folder" in message
    opened.store.upsert([point(2, 1)])
    assert opened.store.count() == 2


def test_a_held_folder_copied_whole_opens_with_every_point(
    opened: Embedded, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # Given points written, and the folder held (its lock taken, everything on disk) as
    # `engram backup --qdrant` holds it
    opened.store.upsert([point(n, 3) for n in range(1, 8)])
    opened.store.stamp("store-a")
    folder = opened.connection.hold()

    # When it is copied and the copy opened in its place
    copy = tmp_path_factory.mktemp("copy")
    shutil.copytree(folder, copy / folder.name)
    restored = connect(opened.engine, copy)
    try:
        # Then the copy holds every point at its version, and the stamp
        store = restored.store(MODEL, DIM)
        assert store.count() == 7
        assert {s.version for s in store.states([pid(n) for n in range(1, 8)]).values()} == {3}
        assert store.identity() == "store-a"
    finally:
        restored.close()
