"""Fusion: candidates of several sources in, one fused score each out. Pure functions.

Every candidate carries both signals — its true cosine similarity to the query and its BM25 with
the tenant's statistics — whichever source found it, so fusion never guesses a missing score.

- ``blend``: a convex blend of the two (seed 001: keyword matches boosted, semantic matches fill
  the gaps, a configurable ratio): the cosine as it is, and the BM25 as its share of the most the
  query's words can give (every word, often, in a short memory).
- ``rrf``: weighted reciprocal rank fusion over the two rankings (k = 60 by default).
- ``adaptive`` (the default): a blend whose keyword side is the BM25 as a share of the best
  candidate's, weighted per query by how rare the query's rarest word is in the tenant
  (``rarity_weight``): a word few memories hold makes keyword evidence sharp (a name, a place),
  common words leave the order to the cosine. It needs nothing but the tenant's statistics.
- ``vector_only`` / ``keyword_only``: one signal, for comparison and for evaluation.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import replace

from shared.search.bm25 import Keywords, TermStats, bm25_ceiling
from shared.search.records import Candidate, Fused
from shared.search.text import stems


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
    by_similarity = sorted(candidates, key=lambda c: (-c.semantic, c.hit.id))
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
    """(1 - r) * cosine + r * keyword share: the cosine as it is (the feedback cosine, when there
    is one), and the BM25 as a share of the most the query's words can give. Both are absolute
    scales, so a memory's fused score depends neither on the other candidates nor on top_k, and a
    query whose words match nothing well gives keyword evidence little say."""
    return [
        Fused(c, (1.0 - keyword_ratio) * c.semantic + keyword_ratio * (c.keyword_share or 0.0))
        for c in candidates
    ]


def rarity(terms: Sequence[str], stats: TermStats) -> float:
    """How rare the query's rarest word is in the tenant: its idf as a share of the idf of a word
    no memory holds (1 = in no memory, about 0.85 = in one of 600, 0.5 = in 1% of them)."""
    if not terms:
        return 0.0
    ceiling = math.log(1.0 + (max(stats.documents, 1) + 0.5) / 0.5)
    return max(stats.idf(term) for term in stems(terms)) / ceiling


def rarity_weight(rarity_of_query: float, most: float, low: float, high: float) -> float:
    """The keyword side's weight: 0 up to rarity ``low``, rising linearly to ``most`` at ``high``."""
    if high <= low:
        return most if rarity_of_query >= high else 0.0
    return most * min(max((rarity_of_query - low) / (high - low), 0.0), 1.0)


def adaptive(candidates: Sequence[Candidate], keyword_weight: float) -> list[Fused]:
    """(1 - w) * cosine + w * BM25 / the best candidate's BM25: the cosine as it is (the feedback
    cosine, when there is one), the keyword score relative to the query's best match, and ``w``
    the query's own (``rarity_weight``)."""
    best = max((c.keyword or 0.0 for c in candidates), default=0.0)
    return [
        Fused(
            c,
            (1.0 - keyword_weight) * c.semantic
            + keyword_weight * ((c.keyword or 0.0) / best if best > 0 else 0.0),
        )
        for c in candidates
    ]


def vector_only(candidates: Sequence[Candidate]) -> list[Fused]:
    return [Fused(c, c.similarity) for c in candidates]


def keyword_only(candidates: Sequence[Candidate]) -> list[Fused]:
    """Only candidates holding a query word; scored by BM25."""
    return [Fused(c, c.keyword) for c in candidates if c.keyword]


def with_keywords(candidates: Sequence[Candidate], terms: Sequence[str], stats: TermStats) -> list[Candidate]:
    """Each candidate's BM25 for the query's words, with the tenant's statistics, and its share of
    the most the words can give."""
    ceiling = bm25_ceiling(terms, stats) if terms else 0.0
    words = Keywords(terms, stats) if terms else None
    scored = []
    for c in candidates:
        keyword = words.score(c.hit.content, c.hit.token_count, c.hit.term_vector) if words else 0.0
        scored.append(replace(c, keyword=keyword, keyword_share=keyword / ceiling if ceiling > 0 else 0.0))
    return scored


def unit(vector: Sequence[float]) -> list[float]:
    """The vector at length one (a zero vector as it is)."""
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [float(x) / norm for x in vector]


def feedback_vector(query: Sequence[float], best: Sequence[Sequence[float]], weight: float) -> list[float]:
    """Rocchio: the query vector moved toward the mean of the best memories' vectors, unit length
    (what the store's ``feedback_scores`` computes in its read)."""
    import numpy as np

    q = np.asarray(unit(query), dtype=np.float64)
    if best and weight > 0:
        vectors = np.asarray(best, dtype=np.float64)
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        q = q + weight * vectors.mean(axis=0)
    return [float(x) for x in q / (np.linalg.norm(q) or 1.0)]
