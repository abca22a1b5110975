"""Neo4j's vector index by its build options: recall@10 against exact search at several k, Neo4j's
CPU a query and a vector written, and the build's time, on a running store's own Memory vectors.

    ENGRAM_NEO4J_URI=bolt://127.0.0.1:7981 PYTHONPATH=. .venv/bin/python ops/bench/vector_index_options.py \
        --neo4j-pid "$(cat .engram-bench/stack/neo4j/neo4j.pid)" \
        --queries-file .engram-bench/corpus/queries.txt \
        '{}' '{"vector.quantization.enabled": false}' \
        '{"vector.hnsw.ef_construction": 200, "vector.quantization.enabled": false}'

The store is the one Engram's settings name (``ENGRAM_NEO4J_*``), the query texts are embedded with
the configured model (``ENGRAM_EMBEDDING_*``).

Copies every Memory's embedding (and the rows of --vectors, a .npy) to ``:IndexProbe`` nodes once
(the store's own index and Memories are not touched), then for each option set given (JSON, over
``vector.dimensions`` and cosine):
makes an index ``index_probe`` on them and times it until ONLINE; asks ``queryNodes`` at each
--k for the first --queries lines of --queries-file and compares the first ten by score with an
exact cosine ranking (numpy); writes --writes vectors to ``:IndexWriteProbe``
nodes in transactions of 32 rows (as the write worker does) and charges Neo4j's CPU, read from
/proc for --neo4j-pid, including --settle seconds after. Run the option sets in turn, more than
once, on a quiet machine: the first set pays Neo4j's warm-up. ``--drop`` removes the probes.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import neo4j
import numpy as np

from shared.embedding import make_embedder
from shared.settings import get_settings

WRITE_BATCH = 32


def main() -> None:
    args = _parser().parse_args()
    settings = get_settings()
    driver = neo4j.GraphDatabase.driver(
        settings.neo4j_uri, auth=(settings.neo4j_user, settings.neo4j_password.get_secret_value())
    )

    def run(query: str, **params: Any) -> list[dict[str, Any]]:
        with driver.session() as session:  # auto-commit: CALL ... IN TRANSACTIONS needs it
            return [dict(r) for r in session.run(query, params)]

    def cpu() -> float:
        fields = Path(f"/proc/{args.neo4j_pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / 100.0

    if args.drop:
        for label in ("IndexProbe", "IndexWriteProbe"):
            run(f"MATCH (p:{label}) CALL (p) {{ DELETE p }} IN TRANSACTIONS OF 5000 ROWS")
        run("DROP INDEX index_probe IF EXISTS")
        run("DROP INDEX index_write_probe IF EXISTS")
        return
    if not run("MATCH (p:IndexProbe) RETURN p LIMIT 1"):
        run(
            "MATCH (m:Memory) WHERE m.embedding IS NOT NULL CALL (m) "
            "{ CREATE (:IndexProbe {id: m.id, embedding: m.embedding}) } IN TRANSACTIONS OF 2000 ROWS"
        )
        if args.vectors:  # more vectors: a larger store than the running one holds
            extra = np.load(args.vectors).astype(np.float32)
            for start in range(0, len(extra), 2000):
                part = extra[start : start + 2000]
                run(
                    "UNWIND $rows AS r CREATE (:IndexProbe {id: r.id, embedding: r.embedding})",
                    rows=[
                        {"id": f"npy-{start + i}", "embedding": [float(x) for x in v]}
                        for i, v in enumerate(part)
                    ],
                )
    rows = run("MATCH (p:IndexProbe) RETURN p.id AS id, p.embedding AS embedding")
    ids = [str(r["id"]) for r in rows]
    matrix = np.asarray([r["embedding"] for r in rows], dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    with open(args.queries_file, encoding="utf-8") as lines:
        texts = [line.strip() for line in lines if line.strip()][: args.queries]
    embedder = make_embedder(settings)
    queries = np.asarray([embedder.embed_query(text) for text in texts], dtype=np.float32).reshape(
        len(texts), -1
    )
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    exact = [{ids[i] for i in np.argsort(-(matrix @ q), kind="stable")[:10]} for q in queries]
    print(f"{len(ids)} vectors, {len(queries)} queries", flush=True)
    results = []
    for options in args.options:
        config = {"vector.dimensions": int(matrix.shape[1]), "vector.similarity_function": "cosine"}
        config.update(json.loads(options))
        result: dict[str, Any] = {"options": json.loads(options)}
        run("DROP INDEX index_probe IF EXISTS")
        began = time.monotonic()
        run(
            "CREATE VECTOR INDEX index_probe FOR (p:IndexProbe) ON p.embedding OPTIONS {indexConfig: $c}",
            c=config,
        )
        run("CALL db.awaitIndexes(3600)")
        result["build_s"] = round(time.monotonic() - began, 1)
        for k in args.k:
            found_share, spent = [], cpu()
            for vector, top in zip(queries, exact, strict=True):
                found = run(
                    "CALL db.index.vector.queryNodes('index_probe', $k, $v) YIELD node, score "
                    "RETURN node.id AS id, score",
                    k=k,
                    v=[float(x) for x in vector],
                )
                first = sorted(found, key=lambda r: -float(r["score"]))[:10]
                found_share.append(len(top & {str(r["id"]) for r in first}) / 10)
            result[f"k{k}"] = {
                "recall_at_10": round(float(np.mean(found_share)), 4),
                "neo4j_cpu_ms_a_query": round(1000 * (cpu() - spent) / len(queries), 2),
            }
        if args.writes:
            result["neo4j_cpu_ms_a_vector_written"] = _write_cost(run, cpu, config, matrix, args)
        print(json.dumps(result), flush=True)
        results.append(result)
    run("DROP INDEX index_probe IF EXISTS")
    if args.json:
        Path(args.json).write_text(json.dumps({"vectors": len(ids), "results": results}, indent=2))


Run = Callable[..., list[dict[str, Any]]]


def _write_cost(
    run: Run, cpu: Callable[[], float], config: dict[str, Any], matrix: np.ndarray, args: argparse.Namespace
) -> float:
    run("MATCH (p:IndexWriteProbe) CALL (p) { DELETE p } IN TRANSACTIONS OF 5000 ROWS")
    run("DROP INDEX index_write_probe IF EXISTS")
    run(
        "CREATE VECTOR INDEX index_write_probe FOR (p:IndexWriteProbe) ON p.embedding "
        "OPTIONS {indexConfig: $c}",
        c=config,
    )
    run("CALL db.awaitIndexes(600)")
    vectors = [[float(x) for x in row] for row in matrix[: args.writes]]
    spent = cpu()
    for start in range(0, len(vectors), WRITE_BATCH):
        batch = vectors[start : start + WRITE_BATCH]
        run(
            "UNWIND $rows AS r CREATE (p:IndexWriteProbe {i: r.i}) SET p.embedding = r.e",
            rows=[{"i": start + j, "e": e} for j, e in enumerate(batch)],
        )
    time.sleep(args.settle)
    cost = 1000 * (cpu() - spent) / len(vectors)
    run("MATCH (p:IndexWriteProbe) CALL (p) { DELETE p } IN TRANSACTIONS OF 5000 ROWS")
    run("DROP INDEX index_write_probe IF EXISTS")
    return float(round(cost, 2))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("options", nargs="*", help="index option sets, JSON, measured in turn")
    parser.add_argument(
        "--vectors", help="a .npy of more vectors (float32, the model's dimension) probed beside"
    )
    parser.add_argument("--neo4j-pid", type=int, required=True, help="the server's process, for its CPU")
    parser.add_argument("--queries-file", default="ops/sample-queries.txt", help="query texts, a line each")
    parser.add_argument("--queries", type=int, default=300, help="the file's first lines asked")
    parser.add_argument("--k", type=int, nargs="+", default=[10, 40, 100])
    parser.add_argument("--writes", type=int, default=10_000, help="vectors written per option set (0: none)")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds charged after the writes")
    parser.add_argument("--drop", action="store_true", help="remove the probe nodes and indexes, and stop")
    parser.add_argument("--json", help="write the results here")
    return parser


if __name__ == "__main__":
    main()
