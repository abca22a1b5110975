"""Recall@10 of the Neo4j vector index against exact search over every stored vector.

The same query vectors go to the index and to an exact cosine ranking of every Memory's
embedding read back from Neo4j (numpy, in this process). The index is asked for the k the search
asks of it (``top_k`` times ``ENGRAM_SEARCH_OVERSAMPLE``, at least ``ENGRAM_SEARCH_VECTOR_MIN_K``),
whose first ten by score are what a search ranks (the target's figure), and at the ks of
``CURVE`` beside it (HNSW's beam is k wide, so a smaller k finds less): what a choice of the least
k would give, measured on the same store.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, LiteralString

import numpy as np

from producers.bench.latency import FLOOR_QUERY
from shared.container import Container

K = 10
CURVE = (10, 40, 100, 200)
VECTORS: LiteralString = (
    "MATCH (m:Memory) WHERE m.embedding IS NOT NULL RETURN m.id AS id, m.embedding AS embedding"
)


def measure(container: Container, queries: Iterator[str], count: int) -> dict[str, Any]:
    graph = container.search_graph
    # Every vector in one read: the primary's store, whose reads have no search's timeout.
    rows = container.graph.read_rows(VECTORS)
    ids = [str(row["id"]) for row in rows]
    matrix = np.asarray([row["embedding"] for row in rows], dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    settings = container.settings
    # What the search's vector source asks of the index (shared/search/sources.py, Neo4jVector).
    asked = max(K * settings.search_oversample, settings.search_vector_min_k)
    ks = sorted({asked, *CURVE})
    found_at: dict[int, list[float]] = {k: [] for k in ks}
    for _ in range(count):
        vector = np.asarray(container.embedder.embed_query(next(queries)), dtype=np.float32).reshape(-1)
        vector /= np.linalg.norm(vector)
        exact = {ids[i] for i in np.argsort(-(matrix @ vector), kind="stable")[:K]}
        query = [float(x) for x in vector]
        for k in ks:
            found = graph.read_rows(FLOOR_QUERY, k=k, vector=query)
            first = sorted(found, key=lambda row: -float(row["score"]))[:K]
            found_at[k].append(len(exact & {str(row["id"]) for row in first}) / min(K, len(ids)))
    return {
        "queries": count,
        "memories": len(ids),
        "k": asked,
        "recall_at_10": float(np.mean(found_at[asked])),
        "index_k10_recall_at_10": float(np.mean(found_at[K])),
        "by_k": {str(k): float(np.mean(found_at[k])) for k in ks},
    }
