"""The embedded vector engines measured through Engram's own adapters (``VectorConnection``).

    .venv/bin/python ops/bench/vector_engines.py --engine edge --points 100000
    .venv/bin/python ops/bench/vector_engines.py --engine local --points 20000

Random unit vectors (384 dimensions) with a Memory's payload, tenants of 1% each. Prints one line
per phase: versioned upserts a second (batches of 256, as the write stage sends them), a tenant's
filtered search (the fallback's: top 10 of one tenant, p50/p99 over --queries), the reconciler's
drift scan (``scroll`` of every point, pages of 1,000), a repair of 10,000 failed syncs (their
states read, then written again at a newer version), and the folder reopened after the process
writing it was SIGKILLed (its WAL replayed: every point acknowledged is there). In a tmp folder
unless --folder; nothing else is touched.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from shared.models import SearchFilters
from shared.settings import Settings
from shared.stores.base import VectorConnection, VectorPoint
from shared.stores.vectors import connect_vectors

MODEL, DIM = "bench-model", 384
BATCH = 256
SCAN_PAGE = 1000
REPAIR = 10_000
CRASH_POINTS = 1000


def connect(engine: str, folder: Path) -> VectorConnection:
    settings = Settings(
        _env_file=None,
        qdrant_url=None,
        qdrant_engine=engine,
        qdrant_path=folder / "qdrant",
        qdrant_edge_path=folder / "qdrant-edge",
    )
    return connect_vectors(settings)


def points(first: int, count: int, tenants: int, version: int, seed: int) -> list[VectorPoint]:
    rng = np.random.default_rng(seed + first)
    vectors = rng.standard_normal((count, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    made: list[VectorPoint] = []
    for offset, vector in enumerate(vectors):
        n = first + offset
        payload: dict[str, Any] = {
            "id": str(uuid.UUID(int=n + 1)),
            "user_id": f"tenant-{n % tenants}",
            "document_id": f"doc-{n // 4}",
            "content": f"memory {n}: " + "lorem ipsum dolor sit amet " * 4,
            "content_hash": f"h{n}-{version}",
            "memory_type": "document",
            "status": "active",
            "tags": ["bench"],
            "created_at": "2026-01-01T00:00:00+00:00",
            "embedding_model": MODEL,
            "embedding_dim": DIM,
        }
        made.append(VectorPoint(payload["id"], vector.tolist(), version, payload))
    return made


def upsert_all(connection: VectorConnection, total: int, tenants: int, seed: int) -> float:
    store = connection.store(MODEL, DIM)
    started = time.perf_counter()
    for first in range(0, total, BATCH):
        store.upsert(points(first, min(BATCH, total - first), tenants, 1, seed))
    return time.perf_counter() - started


def searches(connection: VectorConnection, queries: int, tenants: int, seed: int) -> list[float]:
    store = connection.store(MODEL, DIM)
    rng = np.random.default_rng(seed + 7)
    took: list[float] = []
    for q in range(queries):
        vector = rng.standard_normal(DIM).astype(np.float32)
        started = time.perf_counter()
        hits = store.search(vector.tolist(), f"tenant-{q % tenants}", SearchFilters(), 10)
        took.append((time.perf_counter() - started) * 1000)
        assert len(hits) == 10 and all(p["user_id"] == f"tenant-{q % tenants}" for p, _ in hits)
    return took


def scan(connection: VectorConnection) -> tuple[int, float]:
    store = connection.store(MODEL, DIM)
    started = time.perf_counter()
    seen, after = 0, None
    while True:
        page, after = store.scroll(after, SCAN_PAGE)
        seen += len(page)
        if after is None:
            return seen, time.perf_counter() - started


def repair(connection: VectorConnection, total: int, tenants: int, seed: int) -> float:
    """As the reconciler re-syncs failed rows: their points' states read, then written at v2."""
    store = connection.store(MODEL, DIM)
    count = min(REPAIR, total)
    started = time.perf_counter()
    for first in range(0, count, BATCH):
        batch = points(first, min(BATCH, count - first), tenants, 2, seed)
        store.states([p.id for p in batch])
        store.upsert(batch)
    return time.perf_counter() - started


def crash_child(engine: str, folder: Path, total: int, tenants: int, seed: int) -> None:
    """Writes CRASH_POINTS new points, says so, and is killed before any close or flush."""
    connection = connect(engine, folder)
    store = connection.store(MODEL, DIM)
    for first in range(total, total + CRASH_POINTS, BATCH):
        store.upsert(points(first, min(BATCH, total + CRASH_POINTS - first), tenants, 1, seed))
    print("written", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


def p(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--engine", choices=["edge", "local"], default="edge")
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--tenants", type=int, default=100, help="tenants of equal size (100: 1%% each)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--folder", type=Path, default=None)
    parser.add_argument("--crash-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    folder = args.folder or Path(tempfile.mkdtemp(prefix="engram-bench-"))
    if args.crash_child:
        crash_child(args.engine, folder, args.points, args.tenants, args.seed)
        return
    print(f"{args.engine}: {args.points} points of {DIM} dimensions, {args.tenants} tenants, in {folder}")

    connection = connect(args.engine, folder)
    took = upsert_all(connection, args.points, args.tenants, args.seed)
    print(f"upsert: {args.points / took:,.0f} points/s ({took:.1f} s, versioned, batches of {BATCH})")
    latencies = searches(connection, args.queries, args.tenants, args.seed)
    print(
        f"filtered search (one tenant, top 10): p50 {statistics.median(latencies):.2f} ms, "
        f"p99 {p(latencies, 0.99):.2f} ms over {args.queries}"
    )
    seen, took = scan(connection)
    print(f"scroll of every point (pages of {SCAN_PAGE}): {seen} in {took:.2f} s")
    took = repair(connection, args.points, args.tenants, args.seed)
    print(f"repair of {min(REPAIR, args.points)} failed syncs (states read, written at v2): {took:.2f} s")
    connection.close()

    child = subprocess.run(
        [
            sys.executable,
            __file__,
            "--crash-child",
            "--engine",
            args.engine,
            "--folder",
            str(folder),
            "--points",
            str(args.points),
            "--tenants",
            str(args.tenants),
            "--seed",
            str(args.seed),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    started = time.perf_counter()
    reopened = connect(args.engine, folder)
    count = reopened.store(MODEL, DIM).count()
    took = time.perf_counter() - started
    reopened.close()
    expected = args.points + CRASH_POINTS
    print(
        f"reopen after a SIGKILLed writer (exit {child.returncode}, said {child.stdout.strip()!r}): "
        f"{count} of {expected} points in {took:.2f} s"
    )


if __name__ == "__main__":
    main()
