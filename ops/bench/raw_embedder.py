"""Raw embedder throughput on the chunks one tenant holds, to set beside the pipeline's own.

    .venv/bin/python ops/bench/raw_embedder.py --user demo

Reads the tenant's chunk texts from Neo4j and embeds them in-process with the configured embedder,
once in a single call and once in calls the size of an ingest task, and prints chunks/s for each.
"""

from __future__ import annotations

import argparse
import time

from shared.embedding import make_embedder
from shared.settings import get_settings
from shared.stores.neo4j import Neo4jStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--user", required=True)
    args = parser.parse_args()
    settings = get_settings()
    store = Neo4jStore(settings)
    texts = store.chunk_texts(args.user)
    store.close()
    if not texts:
        raise SystemExit(f"no chunks stored for user {args.user!r}")
    embedder = make_embedder(settings)
    embedder.embed(texts[: settings.embedding_batch_size])  # warm-up: load and first-run costs
    # Once in one call (the embedder sorts all texts by length: least padding), and once in calls
    # of as many chunks as an ingest task carries for one-chunk documents, as the pipeline does.
    per_task = settings.ingest_batch_documents
    for label, calls in (
        ("one call", [texts]),
        (f"calls of {per_task}", [texts[i : i + per_task] for i in range(0, len(texts), per_task)]),
    ):
        started = time.perf_counter()
        for call in calls:
            embedder.embed(call)
        elapsed = time.perf_counter() - started
        print(
            f"raw embedder, {label}: {len(texts)} chunks in {elapsed:.1f} s "
            f"({len(texts) / elapsed:.1f} chunks/s)"
        )


if __name__ == "__main__":
    main()
