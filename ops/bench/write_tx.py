"""The write stage's transaction for one new document at a time (issue 28, target 6), on the Neo4j
the ENGRAM_* settings name.

    .venv/bin/python ops/bench/write_tx.py --documents 300 --base 10000

What a webhook's post costs the write worker between the embed stage and searchable: one
``write_documents`` of one new document (a conversation turn, one chunk in a session, or a note
of three chunks, alternately; real passages of ../shared/datasets/msmarco-5k with random unit
vectors), timed one after another in a tenant of its own. ``--base`` Memories of another tenant
are written first (once: kept for later runs) so the indexes are not empty. Prints one JSON
object, with Neo4j's CPU a chunk over the timed writes; the tenant's nodes are removed at the end.

    --batch 16 --vectors pool|random|real   # documents a write, as the write stage sends them;
                                            # the vectors (the bench's stub embedder's, or real)

The code measured is whichever ``shared`` is imported: to measure another commit's on the same
store, ``git archive <commit> shared | tar -x -C /tmp/before`` and run with PYTHONPATH=/tmp/before.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import zlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, LiteralString

import numpy as np

import shared
from producers.bench.processes import cpu_by_role, cpu_spent
from shared.container import Container
from shared.ids import content_hash, document_key, memory_id
from shared.models import ChunkRecord, DocumentIn, StagedDocument
from shared.settings import get_settings
from shared.stores.base import DocumentWrite

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "datasets" / "msmarco-5k" / "corpus.jsonl"
MODEL = "writebench-random"
DIM = 384
BASE_TENANT = "writebench-base"
COUNT: LiteralString = "MATCH (m:Memory {user_id: $tenant}) RETURN count(m) AS n"
FORGET: LiteralString = "MATCH (n) WHERE n.user_id = $tenant DETACH DELETE n"


def passages() -> list[str]:
    with CORPUS.open() as lines:
        return [json.loads(line)["text"] for line in lines]


def write_of(
    tenant: str, n: int, texts: list[str], vectors: np.ndarray, session: str | None
) -> DocumentWrite:
    doc_id = f"doc-{n:07}"
    document = DocumentIn(
        user_id=tenant, id=doc_id, text="\n\n".join(texts), title=doc_id, session_id=session
    )
    chunks = [
        ChunkRecord(
            id=memory_id(tenant, doc_id, i),
            chunk_index=i,
            content=text,
            content_hash=content_hash(text),
            token_count=len(text.split()),
        )
        for i, text in enumerate(texts)
    ]
    staged = StagedDocument(
        document=document,
        key=document_key(tenant, doc_id),
        version=time.time_ns(),
        content_hash=content_hash(document.text),
        received_at=datetime.now(UTC),
        chunks=chunks,
    )
    return DocumentWrite(staged, [[float(x) for x in v] for v in vectors], MODEL)


def unit(rng: np.random.Generator, rows: int) -> np.ndarray:
    vectors: np.ndarray = rng.normal(size=(rows, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


class Vectors:
    """The vectors written: ``random`` (a fresh random unit vector a chunk), ``pool`` (one of 256
    fixed ones picked by the text's CRC, as the bench's instant embedder answers) or ``real``
    (the configured embedder's, computed before the timing)."""

    def __init__(self, kind: str, container: Container, rng: np.random.Generator) -> None:
        self.kind = kind
        self._embedder = container.embedder if kind == "real" else None
        self._rng = rng
        self._pool = unit(np.random.default_rng(28), 256)

    def of(self, texts: list[str]) -> np.ndarray:
        if self._embedder is not None:
            return np.asarray(self._embedder.embed(texts), dtype=np.float32)
        if self.kind == "pool":
            return self._pool[[zlib.crc32(t.encode()) % len(self._pool) for t in texts]]
        return unit(self._rng, len(texts))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--documents", type=int, default=300, help="new documents written, one at a time")
    parser.add_argument("--base", type=int, default=10_000, help="Memories of another tenant first")
    parser.add_argument("--label", default="", help="a name for this run in the JSON")
    parser.add_argument("--vectors", choices=("random", "pool", "real"), default="random")
    parser.add_argument("--batch", type=int, default=1, help="documents a write (the timing: a write)")
    args = parser.parse_args(argv)
    settings = get_settings()
    container = Container(settings)
    graph = container.graph
    graph.ensure_schema(MODEL, DIM)
    texts = passages()
    rng = np.random.default_rng(28)
    vectors = Vectors(args.vectors, container, rng)
    have = int(graph.read_rows(COUNT, tenant=BASE_TENANT)[0]["n"])
    for start in range(have, args.base, 200):
        batch = [
            write_of(BASE_TENANT, n, [texts[n % len(texts)]], vectors.of([texts[n % len(texts)]]), None)
            for n in range(start, min(start + 200, args.base))
        ]
        graph.write_documents(batch)
        print(f"base: {start + len(batch)}/{args.base}", file=sys.stderr)
    tenant = f"writebench-{time.time_ns()}"
    timings: dict[str, list[float]] = {"turn": [], "note": []}
    writes: list[tuple[str, list[DocumentWrite]]] = []
    for first in range(0, args.documents + 10 * args.batch, args.batch):
        kind = "turn" if (first // args.batch) % 2 == 0 else "note"
        batch = []
        for n in range(first, first + args.batch):
            picked = [texts[(n * 7 + i) % len(texts)] for i in range(1 if kind == "turn" else 3)]
            batch.append(write_of(tenant, n, picked, vectors.of(picked), "s1" if kind == "turn" else None))
        writes.append((kind, batch))
    chunks = sum(len(w.staged.chunks) for _, batch in writes[10:] for w in batch)
    try:
        for index, (kind, batch) in enumerate(writes):
            if index == 10:  # the first few: plans compiled, caches warm
                cpu_before = cpu_by_role(Path(settings.data_dir))
            started = time.perf_counter()
            graph.write_documents(batch)
            if index >= 10:
                timings[kind].append((time.perf_counter() - started) * 1000)
        neo4j_cpu = cpu_spent(cpu_before, cpu_by_role(Path(settings.data_dir))).get("neo4j", 0.0)
    finally:
        graph.write_rows(FORGET, tenant=tenant)
        container.close()
    result: dict[str, Any] = {
        "label": args.label,
        "shared": str(Path(shared.__file__).parent),
        "vectors": args.vectors,
        "batch": args.batch,
        "chunks": chunks,
        "neo4j_cpu_ms_per_chunk": round(1000 * neo4j_cpu / chunks, 2),
    }
    for kind, ms in timings.items():
        ms.sort()
        result[kind] = {
            "writes": len(ms),
            "p50_ms": round(statistics.median(ms), 2),
            "p95_ms": round(ms[int(len(ms) * 0.95) - 1], 2),
            "mean_ms": round(statistics.fmean(ms), 2),
        }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
