"""Qdrant Edge when its storage stops taking writes, on the real engine in a child process.

Edge keeps its WAL and payload storage in memory-mapped files. When a write needs a page the
filesystem cannot give (a file made immutable, what ``qdrant-unwritable`` does to the shard; the
disk full, what ``disk-full`` does), the engine touches memory the kernel cannot back and the
process dies of SIGBUS (exit -7): the owner of the embedded folder (the worker of write,
reconcile and fallback) is gone, not a write refused. The adapter must refuse such a write
itself, as a retryable ``ServiceUnavailable``. Needs root (``chattr``, ``mount``), as the fault
suite does.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CHILD = """
import subprocess, sys, uuid
from pathlib import Path
from shared.errors import ServiceUnavailable
from shared.settings import Settings
from shared.stores.base import VectorPoint
from shared.stores.qdrant_edge import EdgeConnection

root = Path(sys.argv[1])
settings = Settings(_env_file=None, qdrant_url=None, qdrant_engine="edge",
                    qdrant_edge_path=root / "edge", qdrant_path=root / "qdrant")
store = EdgeConnection(settings).store("m", 4)
def point(n):
    payload = {"user_id": "a", "content": "x" * 2000}
    return VectorPoint(str(uuid.UUID(int=n)), [1.0, float(n), 0.5, 0.5], 1, payload)
store.upsert([point(1)])
if sys.argv[2] == "immutable":
    subprocess.run(["chattr", "-R", "+i", str(root / "edge" / store.collection)], check=True)
else:  # "full", "full-reopen": the disk full, to the last byte
    for name, block in (("filler", bytes(65536)), ("filler-tail", bytes(1))):
        try:
            with (root / name).open("wb", buffering=0) as out:
                while out.write(block):
                    pass
        except OSError:
            pass
if sys.argv[2] == "full-reopen":  # the owner restarted on the full disk, then asked to search
    store.close()
    store = EdgeConnection(settings).store("m", 4)
try:
    if sys.argv[2] == "full-reopen":
        print("counted", store.count())
    for first in range(2, 5000, 256):
        store.upsert([point(n) for n in range(first, first + 256)])
    print("written")
except ServiceUnavailable as exc:
    print("refused:", exc)
"""


def _child(folder: Path, mode: str) -> subprocess.CompletedProcess[str]:
    """CHILD in a process of its own, so a SIGBUS shows as its exit code, not this test's."""
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(folder), mode], capture_output=True, text=True, timeout=120
    )


def _child_on_tmpfs(folder: Path, mode: str) -> subprocess.CompletedProcess[str]:
    """CHILD with ``folder`` a 48 MB tmpfs (an empty shard takes about 16), unmounted after."""
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(folder)], check=True)
    try:
        return _child(folder, mode)
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_write_to_an_unwritable_shard_is_refused_not_a_crash(tmp_path: Path) -> None:
    # Given an Edge shard holding a point, whose files are then made immutable
    folder = tmp_path / "backup"
    try:
        # When a batch that makes its storage grow is written
        done = _child(folder, "immutable")
    finally:
        subprocess.run(["chattr", "-R", "-i", str(folder)], check=False)

    # Then the process lives, and the write is refused as the service unavailable (retried)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    assert done.stdout.startswith("refused: qdrant is unavailable"), done.stdout


def test_a_write_to_a_full_disk_is_refused_not_a_crash(tmp_path: Path) -> None:
    # Given an Edge shard holding a point on a 48 MB tmpfs (an empty shard takes about 16), whose
    # free space is then filled to the last byte

    # When batches are written
    done = _child_on_tmpfs(tmp_path / "backup", "full")

    # Then the process lives, and the write is refused as the service unavailable (retried)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    assert done.stdout.startswith("refused: qdrant is unavailable: write: No space left on device"), (
        done.stdout
    )


def test_a_shard_loaded_on_a_full_disk_is_refused_not_a_crash(tmp_path: Path) -> None:
    # Given an Edge shard on a 48 MB tmpfs filled to the last byte, closed (its owner restarted)

    # When the shard is loaded again (a count, as a search or the reconciler's scan loads it)
    done = _child_on_tmpfs(tmp_path / "backup", "full-reopen")

    # Then the process lives, and the load is refused as the service unavailable (retried)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    assert done.stdout.startswith("refused: qdrant is unavailable: write: No space left on device"), (
        done.stdout
    )
