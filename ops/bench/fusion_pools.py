"""Dumps each judged query's candidate pool (both signals of every candidate) for offline study
of fusion functions, and scores a few fusions on it.

    .venv/bin/python ops/bench/fusion_pools.py ../shared/datasets/msmarco-5k pools.json

The set must be ingested already (``engram eval`` makes tenant ``eval-<name>``). Candidates come
from the same Searcher the query worker runs, against the live Neo4j.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from shared.embedding import make_embedder
from shared.evaluation.beir import load_beir
from shared.search import Query, Searcher, query_terms
from shared.search.bm25 import bm25_ceiling
from shared.settings import get_settings
from shared.stores.neo4j import Neo4jStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--pool", type=int, default=400)
    args = parser.parse_args()

    dataset = load_beir(args.dataset)
    settings = get_settings()
    store = Neo4jStore(settings)
    embedder = make_embedder(settings)
    searcher = Searcher(store, embedder, settings)
    pools = {}
    ceilings = {}
    for query_id, text in dataset.queries.items():
        query = Query(
            text=text,
            vector=embedder.embed_query(text).tolist(),
            user_id=f"eval-{dataset.name}",
            filters=__import__("shared.models", fromlist=["SearchFilters"]).SearchFilters(),
            top_k=args.pool // 4,
            pool=args.pool,
            terms=query_terms(text),
        )
        ceilings[query_id] = bm25_ceiling(query.terms, searcher.term_stats(query)) if query.terms else 0.0
        pools[query_id] = [
            {
                "doc": c.hit.document_id,
                "sim": c.similarity,
                "kw": c.keyword,
                "vr": c.vector_rank,
                "kr": c.keyword_rank,
                "len": c.hit.token_count,
                "text": c.hit.content,
            }
            for c in searcher.candidates(query, "blend")
        ]
    args.out.write_text(json.dumps({"qrels": dataset.qrels, "pools": pools, "ceilings": ceilings}))
    store.close()


if __name__ == "__main__":
    main()
