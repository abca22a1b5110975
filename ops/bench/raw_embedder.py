"""Raw embedder throughput on the chunks one tenant holds, to set beside the pipeline's own.

    .venv/bin/python ops/bench/raw_embedder.py --user demo

Reads the tenant's chunk texts from Neo4j and embeds them in-process in batches of
ENGRAM_EMBEDDING_BATCH_SIZE, exactly as the embed worker batches them, and prints chunks/s.
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
    started = time.perf_counter()
    embedder.embed(texts)
    elapsed = time.perf_counter() - started
    print(f"raw embedder: {len(texts)} chunks in {elapsed:.1f} s ({len(texts) / elapsed:.1f} chunks/s)")


if __name__ == "__main__":
    main()
