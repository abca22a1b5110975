"""The vector index's build and query time on a running Neo4j, to compare the Java it runs on
(docs/bench/figures.md, "Neo4j on a JDK with the Vector API").

    .venv/bin/python ops/bench/vector_api.py bolt://127.0.0.1:7998 [--count 30000]

Run it against a Neo4j of its own (its Memories and vector indexes are deleted first): start one with
``ENGRAM_DATA_DIR=/tmp/vector-api ENGRAM_NEO4J_URI=bolt://127.0.0.1:7998`` and ``neo4j_start``
of ops/lib/neo4j.sh, once with ``ENGRAM_NEO4J_JAVA_HOME`` set to each Java. It plants ``count``
random unit vectors of 384 dimensions among ten tenants, makes an index ``WITH [m.user_id]``
(m 16, ef_construction 200, unquantized) and times it to ONLINE, then 300 queries (the first 50
not counted) of a 10% tenant through ``SEARCH`` and of everyone through ``queryNodes``, k 40.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any, LiteralString

import neo4j
import numpy as np

DIMENSION, TENANTS, QUERIES, WARM_UP, K = 384, 10, 300, 50, 40
INDEX: LiteralString = "vector_api_bench"
CREATE: LiteralString = (
    f"CYPHER 25 CREATE VECTOR INDEX {INDEX} FOR (m:Memory) ON m.embedding WITH [m.user_id] OPTIONS "
    "{indexConfig: {`vector.dimensions`: 384, `vector.similarity_function`: 'cosine', "
    "`vector.hnsw.m`: 16, `vector.hnsw.ef_construction`: 200, `vector.quantization.type`: 'NONE'}}"
)
SEARCH: LiteralString = (
    f"CYPHER 25 MATCH (m:Memory) SEARCH m IN (VECTOR INDEX {INDEX} FOR $vector WHERE m.user_id = $user "
    "LIMIT $k) SCORE AS score RETURN m.id AS id"
)
NODES: LiteralString = (
    f"CALL db.index.vector.queryNodes('{INDEX}', $k, $vector) YIELD node RETURN node.id AS id"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("uri")
    parser.add_argument("--count", type=int, default=30_000)
    args = parser.parse_args()
    password = os.environ.get("ENGRAM_NEO4J_PASSWORD", "engram-dev-password")
    with neo4j.GraphDatabase.driver(args.uri, auth=("neo4j", password)) as driver:
        plant(driver, args.count)
        started = time.perf_counter()
        driver.execute_query(CREATE)
        driver.execute_query("CALL db.awaitIndexes(3600)")
        print(f"index build to ONLINE: {time.perf_counter() - started:.1f} s ({args.count} vectors)")
        queries = _unit(np.random.default_rng(5).normal(size=(QUERIES, DIMENSION)))
        for name, statement in (("SEARCH, a 10% tenant", SEARCH), ("queryNodes, everyone", NODES)):
            print(f"{name}, k {K}: {_p50(driver, statement, queries):.2f} ms p50")


def plant(driver: neo4j.Driver, count: int) -> None:
    with driver.session() as session:  # batches need an implicit transaction
        session.run("MATCH (m:Memory) CALL (m) { DETACH DELETE m } IN TRANSACTIONS OF 10000 ROWS").consume()
    for row in driver.execute_query("SHOW VECTOR INDEXES YIELD name").records:
        driver.execute_query(f"DROP INDEX {row['name']}")
    vectors = _unit(np.random.default_rng(3).normal(size=(count, DIMENSION)))
    for start in range(0, count, 5000):
        rows = [
            {"id": start + i, "user": f"u{(start + i) % TENANTS}", "embedding": v.tolist()}
            for i, v in enumerate(vectors[start : start + 5000])
        ]
        driver.execute_query(
            "UNWIND $rows AS r CREATE (:Memory {id: r.id, user_id: r.user, embedding: r.embedding})",
            rows=rows,
        )


def _p50(driver: neo4j.Driver, statement: LiteralString, queries: Any) -> float:
    took = []
    for i, vector in enumerate(queries):
        started = time.perf_counter()
        driver.execute_query(statement, vector=vector.tolist(), user=f"u{i % TENANTS}", k=K)
        took.append((time.perf_counter() - started) * 1000)
    return statistics.median(took[WARM_UP:])


def _unit(vectors: Any) -> Any:
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


if __name__ == "__main__":
    main()
