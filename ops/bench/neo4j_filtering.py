"""Small tenants in a large store: one tenant's top 10 from Neo4j's vector index, post-filtered
(5.26's ``db.index.vector.queryNodes``) against filtered inside the index (2026.x: Cypher 25's
``SEARCH ... WHERE``, on an index made ``WITH [m.user_id]``), through a running server's bolt port.

    PYTHONPATH=. .venv/bin/python ops/bench/neo4j_filtering.py \
        --uri bolt://127.0.0.1:7851 --uri bolt://127.0.0.1:7861 --json figures.json
    PYTHONPATH=. .venv/bin/python ops/bench/neo4j_filtering.py --uri bolt://127.0.0.1:7861 --reuse \
        --reindex --index-config '{"vector.quantization.type": "SCALAR"}'

Loads --points Memories into each empty database (batches of 1,000, Engram's `memory_id` constraint
and `memory_user_id` index first, the vector index after, timed until ONLINE; --reuse measures
stores this script loaded before, --reindex makes their vector index again with --index-config).
Servers given together are measured query by query in turn, under the same load. Vectors:
well-spread random unit vectors (384 dimensions, seeded), or a float32 matrix of real embeddings
from --vectors (.npy). Tenants, assigned at random so none sits in one region of the space: 1%, 10%
and 50% of the store, the rest in tenants of 1%.

For each of the three, --queries random unit queries (the same for every server), each asked of:
  postfilter k=10  queryNodes(10) kept where the tenant matches (what a naive query returns);
  engram           Engram's own vector source (shared/search/sources.Neo4jVector over the query
                   constants of shared/stores/neo4j/search_queries): an exact scan of a tenant of at
                   most 2,000, else queryNodes with k grown 4x until the pool of 40 is met; top 10;
  in-index k=10    (2026.x) SEARCH ... WHERE m.user_id = $user_id LIMIT 10;
  in-index k=40    (2026.x) the same with LIMIT 40, Engram's pool, its top 10.
Per method: p50/p99 latency (the client's wall time), how many queries returned the full 10, and
recall@10 against the exact top 10 within the tenant (numpy, cosine).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, LiteralString, cast

import neo4j
import numpy as np
import numpy.typing as npt

from shared.embedding import make_embedder
from shared.models import SearchFilters
from shared.search.sources import Neo4jVector, Query, Row, SearchStore
from shared.settings import get_settings
from shared.stores.neo4j import schema_queries
from shared.stores.neo4j import search_queries as sq
from shared.stores.neo4j.schema_queries import VECTOR_INDEX

DIM = 384
BATCH = 1000
TOP_K = 10
POOL = 40  # top_k x ENGRAM_SEARCH_OVERSAMPLE, as the searcher asks each source
EXACT_SCAN_LIMIT = 2000  # ENGRAM_SEARCH_EXACT_SCAN_LIMIT's default
MAX_K = 10_000  # ENGRAM_SEARCH_VECTOR_MAX_K's default
WARMUP = 20
Vectors = npt.NDArray[np.float32]

SCHEMA: tuple[LiteralString, ...] = (
    "CREATE CONSTRAINT memory_id IF NOT EXISTS FOR (m:Memory) REQUIRE m.id IS UNIQUE",
    "CREATE INDEX memory_user_id IF NOT EXISTS FOR (m:Memory) ON (m.user_id)",
)
LOAD = """
UNWIND $rows AS row
CREATE (:Memory {id: row.id, user_id: row.user_id, content: row.content, memory_type: 'document',
                 status: 'active', created_at: datetime(), embedding: row.embedding})
"""
COUNT = "MATCH (m:Memory) RETURN count(m) AS n"
VERSION = "CALL dbms.components() YIELD versions RETURN versions[0] AS version"
INDEX_STATE = (
    "SHOW INDEXES YIELD name, state, populationPercent, indexProvider, options "
    "WHERE name = $name RETURN state, populationPercent, indexProvider, options"
)
# Engram's index (shared/stores/neo4j/schema_queries.CREATE_VECTOR_INDEX), its config open to --index-config;
# on 2026.x with the tenant as an additional property, filtered inside the index.
CREATE_INDEX = (
    f"CREATE VECTOR INDEX {VECTOR_INDEX} IF NOT EXISTS FOR (m:Memory) ON m.embedding "
    "OPTIONS {{indexConfig: {config}}}"
)
CREATE_FILTERED_INDEX = (
    f"CYPHER 25 CREATE VECTOR INDEX {VECTOR_INDEX} IF NOT EXISTS FOR (m:Memory) ON m.embedding "
    "WITH [m.user_id] OPTIONS {{indexConfig: {config}}}"
)
DROP_INDEX = f"DROP INDEX {VECTOR_INDEX} IF EXISTS"
POSTFILTERED = f"""
CALL db.index.vector.queryNodes('{VECTOR_INDEX}', $k, $vector) YIELD node AS m, score
WITH m, score WHERE m.user_id = $user_id
RETURN m.id AS id
"""
IN_INDEX = f"""
CYPHER 25
MATCH (m:Memory)
  SEARCH m IN (VECTOR INDEX {VECTOR_INDEX} FOR $vector WHERE m.user_id = $user_id LIMIT $k) SCORE AS score
RETURN m.id AS id ORDER BY score DESC LIMIT {TOP_K}
"""


class BenchStore:
    """The three reads ``Neo4jVector`` asks of ``SearchStore``, over Engram's own query constants
    (as ``Neo4jStore`` runs them: read-routed ``execute_query``)."""

    def __init__(self, driver: neo4j.Driver) -> None:
        self._driver = driver

    def _read(self, query: LiteralString, **params: Any) -> list[Row]:
        records, _, _ = self._driver.execute_query(query, params, routing_=neo4j.RoutingControl.READ)
        return [record.data() for record in records]

    def count_filtered(self, filters: Row, limit: int) -> int:
        return int(self._read(sq.COUNT_FILTERED, limit=limit, **filters)[0]["n"])

    def tenant_in_vector_index(self) -> bool:
        rows = self._read(schema_queries.SHOW_VECTOR_INDEX, name=schema_queries.VECTOR_INDEX)
        return bool(rows) and "user_id" in rows[0]["properties"]

    def vector_candidates(
        self, vector: list[float], k: int, filters: Row, keep: int
    ) -> tuple[int, list[Row]]:
        query = sq.VECTOR_CANDIDATES_IN_INDEX if self.tenant_in_vector_index() else sq.VECTOR_CANDIDATES
        row = self._read(query, vector=vector, k=k, keep=keep, **filters)[0]
        return int(row["found"]), list(row["kept"])

    def exact_candidates(self, vector: list[float], k: int, filters: Row) -> list[Row]:
        return list(self._read(sq.EXACT_CANDIDATES, vector=vector, k=k, **filters)[0]["kept"])


def embedded_queries(path: Path, count: int) -> Vectors:
    """The first ``count`` lines of ``path`` embedded as Engram embeds a query, to unit length."""
    texts = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()][:count]
    if len(texts) < count:
        raise SystemExit(f"{path} has {len(texts)} queries, {count} are needed")
    embedder = make_embedder(get_settings())
    queries = np.asarray([embedder.embed_query(text) for text in texts], dtype=np.float32).reshape(count, -1)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    return queries


def unit_vectors(count: int, seed: int) -> Vectors:
    vectors = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def tenants(points: int, seed: int) -> tuple[list[str], dict[str, str]]:
    """Each point's tenant, and the measured ones by name (1%, 10%, 50%; the rest in 1% tenants)."""
    sizes = {"1%": points // 100, "10%": points // 10, "50%": points // 2}
    names = {share: f"tenant-{share[:-1]}pct" for share in sizes}
    owners: list[str] = []
    for share, size in sizes.items():
        owners += [names[share]] * size
    rest = points - len(owners)
    owners += [f"tenant-rest-{n // max(1, points // 100)}" for n in range(rest)]
    order = np.random.default_rng(seed + 1).permutation(points)
    return [owners[i] for i in order], names


def load(driver: neo4j.Driver, vectors: Vectors, owners: list[str]) -> float:
    for statement in SCHEMA:
        driver.execute_query(statement)
    started = time.perf_counter()
    for first in range(0, len(vectors), BATCH):
        rows = [
            {"id": f"m{n}", "user_id": owners[n], "content": f"memory {n}", "embedding": vectors[n].tolist()}
            for n in range(first, min(first + BATCH, len(vectors)))
        ]
        driver.execute_query(LOAD, rows=rows)
    return time.perf_counter() - started


def build_index(driver: neo4j.Driver, filtered: bool, extra: Row) -> tuple[float, dict[str, Any]]:
    config = {"vector.dimensions": DIM, "vector.similarity_function": "cosine", **extra}
    literal = ", ".join(f"`{key}`: {json.dumps(value)}" for key, value in config.items())
    statement = CREATE_FILTERED_INDEX if filtered else CREATE_INDEX
    started = time.perf_counter()
    driver.execute_query(statement.format(config="{" + literal + "}"))
    while True:
        records, _, _ = driver.execute_query(INDEX_STATE, name=VECTOR_INDEX)
        state = records[0].data()
        if state["state"] == "ONLINE":
            return time.perf_counter() - started, state
        if state["state"] == "FAILED":
            raise RuntimeError(f"vector index failed: {state}")
        time.sleep(0.5)


def exact_top(vectors: Vectors, members: npt.NDArray[np.int64], query: Vectors) -> set[str]:
    scores = vectors[members] @ query
    best = members[np.argsort(-scores, kind="stable")[:TOP_K]]
    return {f"m{n}" for n in best}


def methods(
    driver: neo4j.Driver, user_id: str, in_index: bool
) -> dict[str, Callable[[list[float]], list[str]]]:
    source = Neo4jVector(cast(SearchStore, BenchStore(driver)), EXACT_SCAN_LIMIT, MAX_K)

    def ids(query: LiteralString, **params: Any) -> list[str]:
        records, _, _ = driver.execute_query(query, params, routing_=neo4j.RoutingControl.READ)
        return [str(record["id"]) for record in records]

    def engram(vector: list[float]) -> list[str]:
        query = Query("", vector, user_id, SearchFilters(), TOP_K, POOL, [])
        found = sorted(source.candidates(query), key=lambda c: -c.similarity)
        return [c.hit.id for c in found[:TOP_K]]

    made: dict[str, Callable[[list[float]], list[str]]] = {
        "postfilter k=10": lambda v: ids(POSTFILTERED, k=TOP_K, vector=v, user_id=user_id),
        "engram": engram,
    }
    if in_index:
        made["in-index k=10"] = lambda v: ids(IN_INDEX, k=TOP_K, vector=v, user_id=user_id)
        made["in-index k=40"] = lambda v: ids(IN_INDEX, k=POOL, vector=v, user_id=user_id)
    return made


def measure(
    servers: dict[str, neo4j.Driver], vectors: Vectors, owners: list[str], user_id: str, queries: Vectors
) -> dict[str, dict[str, dict[str, float]]]:
    """Every server's methods interleaved query by query, so the machine's other load falls on
    each alike."""
    members = np.array([n for n, owner in enumerate(owners) if owner == user_id], dtype=np.int64)
    asked = {
        (version, name): run
        for version, driver in servers.items()
        for name, run in methods(driver, user_id, filters_in_index(version)).items()
    }
    took: dict[tuple[str, str], list[float]] = {key: [] for key in asked}
    complete = dict.fromkeys(asked, 0)
    recall = dict.fromkeys(asked, 0.0)
    for n, query in enumerate(queries):
        truth = exact_top(vectors, members, query) if n >= WARMUP else set()
        vector = query.tolist()
        for key, run in asked.items():
            started = time.perf_counter()
            got = run(vector)
            elapsed = (time.perf_counter() - started) * 1000
            if n < WARMUP:
                continue
            took[key].append(elapsed)
            complete[key] += len(got) == TOP_K
            recall[key] += len(truth & set(got)) / TOP_K
    counted = len(queries) - WARMUP
    figures: dict[str, dict[str, dict[str, float]]] = {version: {} for version in servers}
    for (version, name), values in took.items():
        figures[version][name] = {
            "p50_ms": statistics.median(values),
            "p99_ms": percentile(values, 0.99),
            "complete": complete[version, name] / counted,
            "recall_at_10": recall[version, name] / counted,
        }
    return figures


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def filters_in_index(version: str) -> bool:
    """SEARCH ... WHERE: a preview in 2026.01, generally available from 2026.02."""
    return int(version.split(".")[0]) >= 2026


def prepare(driver: neo4j.Driver, version: str, vectors: Vectors, owners: list[str], args: Any) -> Row:
    """Loads the memories and builds the vector index (unless --reuse; --reindex builds it
    again): their times."""
    stored = int(driver.execute_query(COUNT).records[0]["n"])
    figures: Row = {}
    if args.reuse:
        if stored != len(vectors):
            raise SystemExit(f"--reuse: neo4j {version} holds {stored} memories, not {len(vectors)}")
        if not args.reindex:
            return figures
        driver.execute_query(DROP_INDEX)
    elif stored:
        raise SystemExit(f"neo4j {version} holds {stored} memories already: give it an empty database")
    else:
        figures["load_s"] = load_s = load(driver, vectors, owners)
        print(f"neo4j {version}: load {load_s:.1f} s ({len(vectors) / load_s:,.0f}/s, batches of {BATCH})")
    index_s, state = build_index(driver, filters_in_index(version), json.loads(args.index_config))
    print(f"neo4j {version}: vector index ONLINE in {index_s:.1f} s ({state['options']})")
    return {**figures, "index_build_s": index_s, "index": state}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--uri", action="append", help="a server's bolt URI (repeat: measured side by side)")
    parser.add_argument("--user", default="neo4j")
    parser.add_argument("--password", default="engram-dev-password")
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200, help="measured queries per tenant")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--vectors", type=Path, default=None, help="an .npy matrix (>= --points rows)")
    parser.add_argument("--reuse", action="store_true", help="the stores hold this script's --points")
    parser.add_argument("--reindex", action="store_true", help="with --reuse: make the vector index again")
    parser.add_argument(
        "--index-config",
        default="{}",
        help='more indexConfig, e.g. \'{"vector.quantization.type": "SCALAR"}\'',
    )
    parser.add_argument(
        "--queries-file",
        type=Path,
        default=None,
        help="query texts, one a line, embedded with the configured model (else random unit vectors)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()

    if args.vectors is not None:
        vectors = np.load(args.vectors).astype(np.float32)[: args.points]
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        kind = f"real ({args.vectors})"
    else:
        vectors, kind = unit_vectors(args.points, args.seed), "random unit vectors"
    owners, measured = tenants(len(vectors), args.seed)
    if args.queries_file is not None:
        queries = embedded_queries(args.queries_file, args.queries + WARMUP)
    else:
        queries = unit_vectors(args.queries + WARMUP, args.seed + 2)
    print(f"{len(vectors):,} memories ({kind}, {DIM} dimensions); {args.queries} queries a tenant")

    result: dict[str, Any] = {"points": len(vectors), "vectors": kind, "queries": args.queries, "servers": {}}
    servers: dict[str, neo4j.Driver] = {}
    try:
        for uri in args.uri or ["bolt://127.0.0.1:7851"]:
            driver = neo4j.GraphDatabase.driver(
                uri,
                auth=(args.user, args.password),
                # No notification reaches the client: the driver logs each one, on the clock.
                notifications_min_severity=neo4j.NotificationMinimumSeverity.OFF,
            )
            version = str(driver.execute_query(VERSION).records[0]["version"])
            servers[version] = driver
            result["servers"][version] = {"uri": uri, **prepare(driver, version, vectors, owners, args)}
        result["tenants"] = {}
        for share, user_id in measured.items():
            figures = measure(servers, vectors, owners, user_id, queries)
            result["tenants"][share] = figures
            for version, by_method in figures.items():
                for name, f in by_method.items():
                    print(
                        f"{share:>4} tenant  {version:<10} {name:<16} p50 {f['p50_ms']:7.2f} ms  "
                        f"p99 {f['p99_ms']:7.2f} ms  complete {f['complete']:6.1%}  "
                        f"recall@10 {f['recall_at_10']:.3f}",
                        flush=True,
                    )
    finally:
        for driver in servers.values():
            driver.close()
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
