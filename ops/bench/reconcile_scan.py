"""The reconciler's drift scan at scale: a store of N Memories built through the write path (random
vectors, no embedding), then a dry-run pass timed whole and by part.

    PYTHONPATH=. .venv/bin/python ops/bench/reconcile_scan.py --sizes 10000,50000,100000 --json scan.json

On the Neo4j and the Qdrant the ENGRAM_* settings name (without ENGRAM_QDRANT_URL, the embedded
folder, which this process opens: no worker may hold it meanwhile). The store is grown to each size
in turn: documents of 20 chunks (random words; 384-dimension random unit vectors) written by
``Neo4jStore.write_documents`` (entities off) and synced to Qdrant by the ``Syncer``, as the write
stage does, in the tenant ``scanbench``. Then, per size:

  full       a dry-run pass asked for on demand (``engram reconcile --dry-run``): the whole store,
             and its time in each store call: Neo4j's pages of Memories (memory_states), Qdrant's
             scroll, the lookups by id (Qdrant's states, Neo4j's live_versions: every id before
             the sweep read ranges of both, now only what a range would repair), the guard's counts;
  scheduled  a scheduled dry-run pass (the slice ``ENGRAM_RECONCILE_SCAN_BUDGET`` allows), if the
             code has a budget;
  repair     with --repair: up to 10,000 Memories marked failed with their retry due, and the pass
             asked for on demand that re-syncs them timed (engram bench's reconcile phase), with
             the drain's reads and writes (sync_backlog, sync_rows, upsert, mark_synced);
  search     with --searches N: N searches of the backup as the fallback asks them (the tenant's
             top 10 of a random unit vector, ``search`` of the adapter, no embedding): p50 and p95.

A backup holding fewer points than Neo4j has Memories (the same Neo4j, and another backup: a new
Qdrant server, ENGRAM_QDRANT_URL) is first filled from Neo4j as ``engram restore --to qdrant`` does
(``Restorer.to_qdrant``, timed: the move of issue 27), so one store is measured on both backups:

    PYTHONPATH=. .venv/bin/python ops/bench/reconcile_scan.py --sizes 10000 --repair --searches 200
    ENGRAM_QDRANT_URL=http://127.0.0.1:6333 ENGRAM_QDRANT_API_KEY=... \
        PYTHONPATH=. .venv/bin/python ops/bench/reconcile_scan.py --sizes 10000 --repair --searches 200

Growing is the slow part (Neo4j's write and read-back of each Memory: 80 ms a Memory here on
two cores at load 20, 2 hours for 100k). Two options make it shorter, the store built the same
(the same ``write_documents``, the same ``Syncer``, the same payload):

  --writers N     N batches written and synced at once, as N write workers would;
  --also-url URL  every batch the Syncer writes goes to a Qdrant server too (its key in
                  ENGRAM_SCAN_ALSO_API_KEY), so the second run, on the server, needs no fill (and
                  times none: the move's figure is then the 10k one).

A build cut short is taken up again: its pending Memories are synced, numbering goes on after the
last document.

The code measured is whichever ``shared`` is imported: to measure another commit's on the same
store, ``git archive <commit> shared | tar -x -C /tmp/before`` and run with PYTHONPATH=/tmp/before.
Refuses a store holding Memories of other tenants.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import random
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, LiteralString

import numpy as np
from pydantic import SecretStr

import shared
from shared.container import Container
from shared.ids import content_hash, document_key, memory_id
from shared.models import ChunkRecord, DocumentIn, SearchFilters, StagedDocument, utc_now
from shared.services.guard import PrimaryGuard
from shared.services.reconcile import Reconciler
from shared.services.sync import Syncer
from shared.settings import Settings, get_settings
from shared.stores.base import DocumentWrite
from shared.stores.folders import embedded_folder

TENANT = "scanbench"
MODEL = "scanbench-random"
DIM = 384
CHUNKS = 20
DOCUMENTS_PER_WRITE = 50
FAILED = 10_000
WORDS = [f"w{n}" for n in range(5000)]
GRAPH_CALLS = {"memory_states", "live_versions", "identity", "backlog_size", "sync_health", "models"}
GRAPH_CALLS |= {"sweep_cursor", "sync_backlog", "sync_rows", "mark_synced"}  # and the backlog's drain
VECTOR_CALLS = {"states", "scroll", "count", "identity", "upsert"}
COUNT: LiteralString = "MATCH (m:Memory) RETURN m.user_id = $tenant AS ours, count(*) AS n"
MARK_FAILED: LiteralString = """
MATCH (m:Memory) WHERE m.user_id = $tenant AND m.vector_sync = 'synced'
WITH m LIMIT $limit
SET m.vector_sync = 'failed', m.vector_sync_error = 'scan bench: backup write refused',
    m.vector_sync_attempts = 1, m.vector_sync_retry_at = datetime() - duration('PT1M')
RETURN count(m) AS n
"""
UNSYNCED: LiteralString = (
    "MATCH (m:Memory) WHERE m.user_id = $tenant AND m.vector_sync <> 'synced' RETURN m.id AS id"
)
LAST_DOCUMENT: LiteralString = "MATCH (m:Memory) WHERE m.user_id = $tenant RETURN max(m.document_id) AS last"
NOT_SYNCED: LiteralString = "MATCH (m:Memory) WHERE m.vector_sync <> 'synced' RETURN count(m) AS n"


class Timings:
    """Seconds spent in each named call of the objects it wraps."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def wrap(self, target: Any, prefix: str, names: set[str]) -> Any:
        timings = self

        class Timed:
            def __getattr__(self, name: str) -> Any:
                found = getattr(target, name)
                if name not in names or not callable(found):
                    return found

                def timed(*args: Any, **kwargs: Any) -> Any:
                    started = time.perf_counter()
                    try:
                        return found(*args, **kwargs)
                    finally:
                        timings.seconds[f"{prefix}.{name}"] += time.perf_counter() - started
                        timings.calls[f"{prefix}.{name}"] += 1

                return timed

            collection = getattr(target, "collection", None)

        return Timed()


def _documents(first: int, count: int, rng: random.Random, version: int) -> list[DocumentWrite]:
    writes: list[DocumentWrite] = []
    vectors = np.random.default_rng(first).standard_normal((count * CHUNKS, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    for n in range(first, first + count):
        doc_id = f"doc-{n:07}"
        texts = [" ".join(rng.choices(WORDS, k=40)) for _ in range(CHUNKS)]
        document = DocumentIn(user_id=TENANT, id=doc_id, text=" ".join(texts), title=doc_id)
        chunks = [
            ChunkRecord(
                id=memory_id(TENANT, doc_id, i),
                chunk_index=i,
                content=text,
                content_hash=content_hash(text),
                token_count=40,
            )
            for i, text in enumerate(texts)
        ]
        staged = StagedDocument(
            document=document,
            key=document_key(TENANT, doc_id),
            version=version,
            content_hash=content_hash(document.text),
            received_at=datetime.now(UTC),
            chunks=chunks,
        )
        rows = vectors[(n - first) * CHUNKS : (n - first + 1) * CHUNKS]
        writes.append(DocumentWrite(staged, [list(map(float, v)) for v in rows], MODEL))
    return writes


@contextmanager
def _unsynchronised(container: Container) -> Iterator[None]:
    """The embedded local mode commits each point on its own, a disk flush each (16 ms a point
    here: 100k points took most of an hour to write); while the store is built, its SQLite file is
    not flushed (qdrant-client's private objects: this bench alone does it). Measured passes run
    with SQLite's default again."""
    store = container.vectors(MODEL, DIM)
    store.count()  # the collection made
    client = getattr(container.qdrant, "client", lambda: None)()
    local = getattr(getattr(client, "_client", None), "collections", {}).get(store.collection)
    connection = getattr(getattr(local, "storage", None), "storage", None)
    if connection is not None:
        connection.execute("PRAGMA synchronous=OFF")
    try:
        yield
    finally:
        if connection is not None:
            connection.execute("PRAGMA synchronous=FULL")


class _Both:
    """Two backups' stores of one model as one: the Syncer's every write goes to both (--also-url)."""

    def __init__(self, first: Any, second: Any) -> None:
        self.first, self.second = first, second

    def upsert(self, points: Any) -> None:
        self.first.upsert(points)
        self.second.upsert(points)

    def delete(self, versions: Any) -> None:
        self.first.delete(versions)
        self.second.delete(versions)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.first, name)


def _grow(container: Container, size: int, held: int, writers: int, also: Container | None) -> dict[str, Any]:
    """Writes and syncs documents until the store holds ``size`` Memories."""
    with _unsynchronised(container):
        return _write(container, size, held, writers, also)


def _write(
    container: Container, size: int, held: int, writers: int, also: Container | None
) -> dict[str, Any]:
    """Batches of documents, each written by ``write_documents`` then synced by the ``Syncer``, as
    the write stage does, ``writers`` batches at once (as that many write workers would)."""
    graph = container.graph
    vectors: Any = container.vectors
    if also is not None:
        vectors = lambda model, dim: _Both(container.vectors(model, dim), also.vectors(model, dim))  # noqa: E731
    syncer = Syncer(graph, vectors, utc_now)
    # A build cut short (the bench stopped, a sync failed) leaves batches written and not synced,
    # and a batch written past one never written: they are synced first, and numbering goes on
    # after the last document.
    left = [str(r["id"]) for r in graph.read_rows(UNSYNCED, tenant=TENANT)]
    if left and syncer.sync(left).error:
        raise SystemExit("the sync of an earlier build's unsynced Memories failed")
    after = graph.read_rows(LAST_DOCUMENT, tenant=TENANT)[0]["last"]
    first = 0 if after is None else int(str(after).removeprefix("doc-")) + 1
    last = first + -(-(size - held) // CHUNKS)
    batches = [(n, min(DOCUMENTS_PER_WRITE, last - n)) for n in range(first, last, DOCUMENTS_PER_WRITE)]

    def one(batch: tuple[int, int]) -> tuple[float, float, int]:
        n, count = batch
        writes = _documents(n, count, random.Random(n), version=1)
        t0 = time.perf_counter()
        outcome = graph.write_documents(writes)
        t1 = time.perf_counter()
        synced = syncer.sync(outcome.memory_ids)
        if synced.error:
            raise SystemExit(f"sync failed: {synced.error}")
        return t1 - t0, time.perf_counter() - t1, count

    started = time.perf_counter()
    write_s = sync_s = 0.0
    documents = first
    with ThreadPoolExecutor(writers) as pool:
        for w, s, count in pool.map(one, batches):
            write_s, sync_s, documents = write_s + w, sync_s + s, documents + count
            if documents % 500 == 0:
                took = time.perf_counter() - started
                print(f"  {documents * CHUNKS:,} memories ({took:.0f} s)", file=sys.stderr, flush=True)
    return {
        "seconds": round(time.perf_counter() - started, 3),
        "writers": writers,
        "neo4j_write_s": round(write_s, 3),
        "qdrant_sync_s": round(sync_s, 3),
        "also_url": None if also is None else also.settings.qdrant_url,
    }


def _reconciler(container: Container, timings: Timings) -> Reconciler:
    """The container's reconciler over stores that time their calls (the code's own options)."""
    s: Settings = container.settings
    graph = timings.wrap(container.graph, "neo4j", GRAPH_CALLS)
    stores: dict[tuple[str, int], Any] = {}

    def vectors(model: str, dimension: int) -> Any:
        if (model, dimension) not in stores:
            store = container.vectors(model, dimension)
            stores[(model, dimension)] = timings.wrap(store, "qdrant", VECTOR_CALLS)
        return stores[(model, dimension)]

    options: dict[str, Any] = {
        "max_delete_share": s.reconcile_max_delete_share,
        "mass_delete_min": s.reconcile_mass_delete_min,
        "backup_models": container.qdrant.models,
        "scan_budget": getattr(s, "reconcile_scan_budget", None),
        "scroll_page": getattr(s, "reconcile_scroll_page", None),
    }
    accepted = inspect.signature(Reconciler).parameters
    options = {k: v for k, v in options.items() if k in accepted}
    return Reconciler(
        graph,
        vectors,
        Syncer(graph, vectors, utc_now),
        utc_now,
        s.reconcile_grace_s,
        s.reconcile_batch_size,
        s.reconcile_scan_page,
        PrimaryGuard(graph, s.reconcile_min_primary_share),
        **options,
    )


def _pass(container: Container, scheduled: bool, dry_run: bool = True) -> dict[str, Any]:
    timings = Timings()
    reconciler = _reconciler(container, timings)
    started = time.perf_counter()
    report = reconciler.run(dry_run=dry_run, scheduled=scheduled)
    seconds = time.perf_counter() - started
    parts = {name: round(t, 3) for name, t in sorted(timings.seconds.items())}
    dumped = report.model_dump(mode="json")
    return {
        "seconds": round(seconds, 3),
        "parts_s": parts,
        "calls": dict(sorted(timings.calls.items())),
        "error": report.error,
        "drift_found": dumped["drift_found"],
        "memories_compared": dumped.get("memories_compared"),
        "points_compared": dumped.get("points_compared"),
        "resynced": report.resynced,
    }


def _repair(container: Container) -> dict[str, Any]:
    graph = container.graph
    marked = int(graph.write_rows(MARK_FAILED, tenant=TENANT, limit=FAILED)[0]["n"])
    measured = _pass(container, scheduled=False, dry_run=False)
    measured["failed"] = marked
    measured["left_unsynced"] = int(graph.read_rows(NOT_SYNCED)[0]["n"])
    return measured


def _fill(container: Container) -> dict[str, Any]:
    """The backup filled from Neo4j (``engram restore --to qdrant``), timed."""
    started = time.perf_counter()
    report = container.restorer.to_qdrant(Syncer(container.graph, container.vectors, utc_now), fresh=True)
    return {
        "seconds": round(time.perf_counter() - started, 3),
        "restored": report.restored,
        "error": report.error,
    }


def _search(container: Container, count: int) -> dict[str, Any]:
    """``count`` searches of the backup as the fallback asks them; their p50 and p95 in ms."""
    store = container.vectors(MODEL, DIM)
    vectors = np.random.default_rng(7).standard_normal((count, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    took: list[float] = []
    for vector in vectors:
        started = time.perf_counter()
        found = store.search([float(x) for x in vector], TENANT, SearchFilters(), 10)
        took.append((time.perf_counter() - started) * 1000)
        if len(found) != 10:
            raise SystemExit(f"a search of the backup found {len(found)} points, not 10")
    p50, p95 = np.percentile(took, [50, 95])
    return {"searches": count, "p50_ms": round(float(p50), 2), "p95_ms": round(float(p95), 2)}


def _print(size: int, name: str, measured: dict[str, Any]) -> None:
    parts = ", ".join(f"{k} {v:.2f}" for k, v in measured["parts_s"].items() if v >= 0.01)
    extra = f" resynced {measured['resynced']:,}" if measured["resynced"] else ""
    print(f"{size:>8,} {name:<10} {measured['seconds']:8.2f} s{extra}  [{parts}]")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000", help="comma-separated store sizes, ascending")
    parser.add_argument("--repair", action="store_true", help="also time the repair of 10,000 failed syncs")
    parser.add_argument("--searches", type=int, default=0, help="also time this many searches of the backup")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--writers", type=int, default=1, help="batches written and synced at once")
    parser.add_argument(
        "--also-url",
        help="while growing, sync each batch to this Qdrant server too (key: ENGRAM_SCAN_ALSO_API_KEY)",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    settings = get_settings().model_copy(update={"graph_entities": "off"})
    container = Container(settings)
    container.graph.ensure_schema(MODEL, DIM)
    also = None
    if args.also_url:
        key = SecretStr(os.environ["ENGRAM_SCAN_ALSO_API_KEY"])
        # 60 s, not the 10 s default: at load 30 a 1,000-point upsert timed out (the build only).
        update = {"qdrant_url": args.also_url, "qdrant_api_key": key, "qdrant_timeout_s": 60.0}
        also = Container(settings.model_copy(update=update))
    print(
        f"code: {shared.__file__}; qdrant: {settings.qdrant_url or embedded_folder(settings)}",
        file=sys.stderr,
    )
    figures: dict[str, Any] = {"code": shared.__file__, "sizes": {}}
    for size in sizes:
        counts = {bool(r["ours"]): int(r["n"]) for r in container.graph.read_rows(COUNT, tenant=TENANT)}
        if counts.get(False):
            raise SystemExit(f"the store holds {counts[False]} Memories of other tenants: use an empty one")
        held = counts.get(True, 0)
        built = _grow(container, max(size, held), held, args.writers, also)
        result: dict[str, Any] = {"memories": max(size, held), "build": built}
        # The worker holds its client open: the embedded folder is read once, not in every pass.
        started = time.perf_counter()
        points = container.vectors(MODEL, DIM).count()
        result["qdrant_open_s"] = round(time.perf_counter() - started, 3)
        if points < result["memories"]:
            result["fill"] = _fill(container)
            print(f"{size:>8,} fill       {result['fill']['seconds']:8.2f} s  {result['fill']}")
        result["full"] = _pass(container, scheduled=False)
        _print(size, "full", result["full"])
        if "scan_budget" in inspect.signature(Reconciler).parameters:
            result["scheduled"] = _pass(container, scheduled=True)
            _print(size, "scheduled", result["scheduled"])
        if args.repair:
            result["repair"] = _repair(container)
            _print(size, "repair", result["repair"])
        if args.searches:
            result["search"] = _search(container, args.searches)
            print(f"{size:>8,} search     {result['search']}")
        figures["sizes"][str(size)] = result
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    container.qdrant.close()
    if also is not None:
        also.qdrant.close()
    container.graph.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
