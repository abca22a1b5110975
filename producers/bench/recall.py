"""Recall@10 of the Neo4j vector index against exact search over every stored vector.

The same query vectors go to the index and to an exact cosine ranking of every Memory's
embedding read back from Neo4j (numpy, in this process). The index is asked twice: for the k the
search asks of it (``top_k`` times ``ENGRAM_SEARCH_OVERSAMPLE``: 40 for 10 results), whose first
ten are what a search ranks (the target's figure), and for k=10, the index alone (HNSW's beam is
k wide, so it finds less).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, LiteralString

import numpy as np

from producers.bench.latency import FLOOR_QUERY
from shared.container import Container

K = 10
VECTORS: LiteralString = (
    "MATCH (m:Memory) WHERE m.embedding IS NOT NULL RETURN m.id AS id, m.embedding AS embedding"
)


def measure(container: Container, queries: Iterator[str], count: int) -> dict[str, Any]:
    graph = container.search_graph
    rows = graph.read_rows(VECTORS)
    ids = [str(row["id"]) for row in rows]
    matrix = np.asarray([row["embedding"] for row in rows], dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    pool = K * container.settings.search_oversample  # what the search's vector source asks for
    recalls: list[float] = []
    index_alone: list[float] = []
    for _ in range(count):
        vector = np.asarray(container.embedder.embed_query(next(queries)), dtype=np.float32).reshape(-1)
        vector /= np.linalg.norm(vector)
        exact = {ids[i] for i in np.argsort(-(matrix @ vector), kind="stable")[:K]}
        asked = [float(x) for x in vector]
        found = graph.read_rows(FLOOR_QUERY, k=pool, vector=asked)
        first = sorted(found, key=lambda row: -float(row["score"]))[:K]
        recalls.append(len(exact & {str(row["id"]) for row in first}) / min(K, len(ids)))
        alone = graph.read_rows(FLOOR_QUERY, k=K, vector=asked)
        index_alone.append(len(exact & {str(row["id"]) for row in alone}) / min(K, len(ids)))
    return {
        "queries": count,
        "memories": len(ids),
        "k": pool,
        "recall_at_10": float(np.mean(recalls)),
        "index_k10_recall_at_10": float(np.mean(index_alone)),
    }
