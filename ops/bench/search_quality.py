"""nDCG@10 and Recall@100 of Engram's search on a BEIR set, at several fulltext weights, in one run.

    .venv/bin/python ops/bench/search_quality.py --user demo \
        --dataset ../shared/datasets/msmarco-5k --weights 0 0.05 0.1

The corpus must already be ingested for that tenant with the corpus ids as document ids (what
``ops/demo`` does with msmarco-5k). Searches run in-process through the same Searcher the query
worker uses, against the live Neo4j, so the figures are those of the product's ranking.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from collections import defaultdict
from pathlib import Path

from shared.embedding import make_embedder
from shared.models import SearchRequest
from shared.search import Searcher
from shared.settings import get_settings
from shared.stores.neo4j import Neo4jStore


def ndcg_at(ranked: list[str], judged: dict[str, int], k: int) -> float:
    gains = [judged.get(doc, 0) for doc in ranked[:k]]
    dcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(gains))
    ideal = sorted(judged.values(), reverse=True)[:k]
    idcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: list[str], judged: dict[str, int], k: int) -> float:
    relevant = {doc for doc, grade in judged.items() if grade > 0}
    return len(relevant & set(ranked[:k])) / len(relevant) if relevant else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--user", required=True)
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--weights", type=float, nargs="+", default=[0.0, 0.05, 0.1])
    args = parser.parse_args()

    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    with (args.dataset / "qrels" / "test.tsv").open() as handle:
        for row in csv.reader(handle, delimiter="\t"):
            if row and row[0] != "query-id":  # the header line is optional
                qrels[row[0]][row[1]] = int(row[2])
    queries = {
        q["_id"]: q["text"]
        for q in map(json.loads, (args.dataset / "queries.jsonl").open())
        if q["_id"] in qrels
    }

    base = get_settings()
    store = Neo4jStore(base)
    embedder = make_embedder(base)
    print(f"{len(queries)} judged queries, tenant {args.user!r}")
    for weight in args.weights:
        settings = base.model_copy(update={"search_fulltext_weight": weight, "search_max_top_k": 100})
        searcher = Searcher(store, embedder, settings)
        ndcg = recall = 0.0
        for query_id, text in queries.items():
            response = searcher.search(SearchRequest(query=text, user_id=args.user, top_k=100))
            ranked = [result.document_id for result in response.results]
            ndcg += ndcg_at(ranked, qrels[query_id], 10)
            recall += recall_at(ranked, qrels[query_id], 100)
        print(
            f"fulltext weight {weight:<5}: "
            f"nDCG@10 {ndcg / len(queries):.3f}  R@100 {recall / len(queries):.3f}"
        )
    store.close()


if __name__ == "__main__":
    main()
