"""nDCG@k and Recall@k as BEIR reports them (pytrec_eval: linear gains, log2 discount, the ideal
from the judgements), and nDCG with exponential gains (2^g - 1) beside it."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

Qrels = Mapping[str, Mapping[str, int]]
Run = Mapping[str, Sequence[str]]


def _dcg(gains: Sequence[float]) -> float:
    return sum(gain / math.log2(rank + 2) for rank, gain in enumerate(gains))


def ndcg_at(ranked: Sequence[str], judged: Mapping[str, int], k: int, exponential: bool = False) -> float:
    """nDCG@k of one query: ``ranked`` best first, ``judged`` corpus id → grade."""

    def gain(grade: int) -> float:
        return float(2**grade - 1) if exponential else float(grade)

    ideal = _dcg([gain(g) for g in sorted((g for g in judged.values() if g > 0), reverse=True)[:k]])
    if ideal == 0:
        return 0.0
    return _dcg([gain(max(judged.get(doc, 0), 0)) for doc in ranked[:k]]) / ideal


def recall_at(ranked: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    """Share of the relevant (grade >= 1) documents found in the first k."""
    relevant = {doc for doc, grade in judged.items() if grade > 0}
    return len(relevant & set(ranked[:k])) / len(relevant) if relevant else 0.0


def evaluate(run: Run, qrels: Qrels) -> dict[str, float]:
    """Means over the judged queries (a query with no results counts 0)."""
    queries = [q for q in qrels if any(g > 0 for g in qrels[q].values())]
    if not queries:
        return {"ndcg@10": 0.0, "ndcg@10_exp": 0.0, "recall@10": 0.0, "recall@100": 0.0}

    def mean(values: Sequence[float]) -> float:
        return sum(values) / len(values)

    return {
        "ndcg@10": mean([ndcg_at(run.get(q, []), qrels[q], 10) for q in queries]),
        "ndcg@10_exp": mean([ndcg_at(run.get(q, []), qrels[q], 10, exponential=True) for q in queries]),
        "recall@10": mean([recall_at(run.get(q, []), qrels[q], 10) for q in queries]),
        "recall@100": mean([recall_at(run.get(q, []), qrels[q], 100) for q in queries]),
    }


def beir(run: Run, qrels: Qrels) -> dict[str, float]:
    """nDCG@10, Recall@10 and Recall@100 from pytrec_eval, averaged as BEIR averages them (over
    the queries pytrec_eval scores), with exponential-gain nDCG@10 beside them."""
    import pytrec_eval

    scored = {q: {doc: float(len(docs) - place) for place, doc in enumerate(docs)} for q, docs in run.items()}
    judged = {q: dict(grades) for q, grades in qrels.items()}
    evaluator = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut.10", "recall.10,100"})
    per_query: dict[str, dict[str, float]] = evaluator.evaluate(scored)
    if not per_query:
        return evaluate(run, qrels)

    def mean(measure: str) -> float:
        return sum(values[measure] for values in per_query.values()) / len(per_query)

    queries = list(per_query)
    exponential = [ndcg_at(run.get(q, []), qrels[q], 10, exponential=True) for q in queries]
    return {
        "ndcg@10": mean("ndcg_cut_10"),
        "ndcg@10_exp": sum(exponential) / len(exponential),
        "recall@10": mean("recall_10"),
        "recall@100": mean("recall_100"),
    }
