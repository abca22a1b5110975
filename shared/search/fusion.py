"""Fusion: candidates of several sources in, one fused score each out. Pure functions.

Every candidate carries both signals — its true cosine similarity to the query and its BM25 with
the tenant's statistics — whichever source found it, so fusion never guesses a missing score.

- ``blend``: a convex blend of the two, each on a scale of its own (seed 001: keyword matches
  boosted, semantic matches fill the gaps, a configurable ratio). The similarity is min-max
  scaled over the candidates; the keyword score is its share of the best one found, so a query
  whose words match nothing well gives keyword evidence little say.
- ``rrf``: weighted reciprocal rank fusion over the two rankings (k = 60 by default).
- ``vector_only`` / ``keyword_only``: one signal, for comparison and for evaluation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from shared.search.bm25 import TermStats, bm25
from shared.search.records import Candidate, Fused


def merge(lists: Iterable[Iterable[Candidate]]) -> list[Candidate]:
    """One candidate per Memory, in the order first found; a Memory found by two sources keeps
    what each knows of it."""
    merged: dict[str, Candidate] = {}
    for candidates in lists:
        for candidate in candidates:
            known = merged.get(candidate.hit.id)
            merged[candidate.hit.id] = candidate if known is None else known.merged(candidate)
    return list(merged.values())


def with_ranks(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Each candidate's place by similarity and, among those holding a query word, by keyword
    score (ties by id, so the order never depends on the order found)."""
    by_similarity = sorted(candidates, key=lambda c: (-c.similarity, c.hit.id))
    vector_rank = {c.hit.id: place for place, c in enumerate(by_similarity, start=1)}
    matching = [c for c in candidates if c.keyword]
    by_keyword = sorted(matching, key=lambda c: (-(c.keyword or 0.0), -c.similarity, c.hit.id))
    keyword_rank = {c.hit.id: place for place, c in enumerate(by_keyword, start=1)}
    return [
        replace(c, vector_rank=vector_rank[c.hit.id], keyword_rank=keyword_rank.get(c.hit.id))
        for c in candidates
    ]


def rrf(candidates: Sequence[Candidate], k: int = 60, keyword_weight: float = 0.5) -> list[Fused]:
    """Weighted reciprocal rank fusion: (1 - w) / (k + vector rank) + w / (k + keyword rank);
    ``keyword_weight`` 0.5 is plain RRF (halved)."""
    fused = []
    for c in candidates:
        score = 0.0
        if c.vector_rank is not None:
            score += (1.0 - keyword_weight) / (k + c.vector_rank)
        if c.keyword_rank is not None:
            score += keyword_weight / (k + c.keyword_rank)
        fused.append(Fused(c, score))
    return fused


def blend(candidates: Sequence[Candidate], keyword_ratio: float) -> list[Fused]:
    """(1 - r) * similarity scaled to [0, 1] over the candidates + r * keyword share of the best."""
    if not candidates:
        return []
    low = min(c.similarity for c in candidates)
    high = max(c.similarity for c in candidates)
    spread = high - low
    best_keyword = max((c.keyword or 0.0) for c in candidates)
    fused = []
    for c in candidates:
        semantic = (c.similarity - low) / spread if spread > 0 else 1.0
        keyword = (c.keyword or 0.0) / best_keyword if best_keyword > 0 else 0.0
        fused.append(Fused(c, (1.0 - keyword_ratio) * semantic + keyword_ratio * keyword))
    return fused


def vector_only(candidates: Sequence[Candidate]) -> list[Fused]:
    return [Fused(c, c.similarity) for c in candidates]


def keyword_only(candidates: Sequence[Candidate]) -> list[Fused]:
    """Only candidates holding a query word; scored by BM25."""
    return [Fused(c, c.keyword) for c in candidates if c.keyword]


def with_keywords(candidates: Sequence[Candidate], terms: Sequence[str], stats: TermStats) -> list[Candidate]:
    """Each candidate's BM25 for the query's words, with the tenant's statistics."""
    return [
        replace(c, keyword=bm25(terms, c.hit.content, stats, c.hit.token_count) if terms else 0.0)
        for c in candidates
    ]
