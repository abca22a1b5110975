"""The search: query embedding → candidates → keyword scores → fusion → ranking → shaping.

Candidates come from Neo4j (vector and fulltext sources); when Neo4j is unreachable, from Qdrant
(vectors alone), and the response says so. Either way the same pure functions fuse, rank and
shape them, so a threshold, the dedup and the nudges mean the same whichever store answered.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Literal

from shared.embedding.base import Embedder, Vectors
from shared.errors import ServiceUnavailable
from shared.models import SearchMethod, SearchRequest, SearchResponse, SearchResult, utc_now
from shared.search import fusion
from shared.search.bm25 import TermStats
from shared.search.ranking import RankingPolicy, rank
from shared.search.records import Candidate, Fused, Ranked
from shared.search.shaping import Neighbours, context, results, within_budget
from shared.search.sources import (
    BackupCandidates,
    CandidateSource,
    Neo4jFulltext,
    Neo4jVector,
    Qdrant,
    Query,
    SearchStore,
    TenantStats,
)
from shared.search.text import query_terms
from shared.settings import Settings


class QueryEmbeddingCache:
    """A small LRU of query vectors, per process; a repeated query skips the model."""

    def __init__(self, embedder: Embedder, size: int) -> None:
        self._embedder = embedder
        self._size = size
        self._vectors: OrderedDict[str, Vectors] = OrderedDict()

    def embed(self, text: str) -> Vectors:
        cached = self._vectors.get(text)
        if cached is not None:
            self._vectors.move_to_end(text)
            return cached
        vector = self._embedder.embed_query(text)
        if self._size:
            self._vectors[text] = vector
            if len(self._vectors) > self._size:
                self._vectors.popitem(last=False)
        return vector


def fuse(method: SearchMethod, candidates: Sequence[Candidate], s: Settings) -> list[Fused]:
    """The fused scores of one method. ``engram`` is the configured fusion; the others are fixed
    baselines (engram eval compares them), never tuned per query."""
    if method == "vector":
        return fusion.vector_only(candidates)
    if method == "bm25":
        return fusion.keyword_only(candidates)
    if method == "rrf":
        return fusion.rrf(candidates, k=60, keyword_weight=0.5)
    if method == "weighted_rrf" or s.search_fusion == "rrf":
        return fusion.rrf(candidates, k=s.search_rrf_k, keyword_weight=s.search_keyword_ratio)
    return fusion.blend(candidates, s.search_keyword_ratio)


class Searcher:
    """Embeds the query, takes candidates from Neo4j or, when Neo4j is down, from the backup,
    and fuses, ranks and shapes them: the response's ``source`` and ``degraded`` say which
    store answered."""

    def __init__(
        self,
        store: SearchStore,
        embedder: Embedder,
        settings: Settings,
        backup: BackupCandidates | None = None,
    ) -> None:
        s = settings
        self._store = store
        self._embedder = embedder
        self._settings = s
        self._vector: CandidateSource = Neo4jVector(store, s.search_exact_scan_limit, s.search_vector_max_k)
        self._fulltext: CandidateSource = Neo4jFulltext(store, s.search_fulltext_max_candidates)
        self._backup: CandidateSource | None = None if backup is None else Qdrant(backup, s.search_timeout_s)
        self._stats = TenantStats(store, s.search_stats_ttl_s)
        self._queries = QueryEmbeddingCache(embedder, s.query_cache_size)
        self._model_checked_until = 0.0

    def search(self, request: SearchRequest, deadline: float | None = None) -> SearchResponse:
        """``deadline`` (``time.monotonic``) is when the caller stops waiting; the backup gets
        what is left of it, else the search timeout."""
        s = self._settings
        top_k = min(request.top_k or s.search_default_top_k, s.search_max_top_k)
        threshold = s.search_default_threshold if request.threshold is None else request.threshold

        started = time.perf_counter()
        vector = self._queries.embed(request.query).tolist()
        embedded = time.perf_counter()

        query = Query(
            text=request.query,
            vector=vector,
            user_id=request.user_id,
            filters=request.filters,
            top_k=top_k,
            pool=top_k * s.search_oversample,
            terms=query_terms(request.query),
            deadline=deadline,
        )
        method = request.method
        source: Literal["neo4j", "qdrant"] = "neo4j"
        degraded = None
        try:
            candidates = self.candidates(query, method)
        except ServiceUnavailable as exc:
            if exc.service != "neo4j" or self._backup is None:
                raise
            source, degraded = "qdrant", f"neo4j unavailable: {exc.detail}"
            candidates = self._backup_candidates(query, exc)
            method = "vector"  # no keyword scores without Neo4j
        ranked = rank(
            fuse(method, candidates, s), RankingPolicy.from_settings(s, threshold), top_k, utc_now()
        )
        found = self._shape(request, ranked, method, source)
        finished = time.perf_counter()

        text, tokens = context(found) if request.token_budget is not None else (None, None)
        return SearchResponse(
            query=request.query,
            results=found,
            count=len(found),
            embedding_time_ms=round((embedded - started) * 1000, 2),
            search_time_ms=round((finished - embedded) * 1000, 2),
            source=source,
            degraded=degraded,
            method=method,
            context=text,
            context_tokens=tokens,
        )

    def candidates(self, query: Query, method: SearchMethod) -> list[Candidate]:
        """Every source the method reads, merged, each candidate with its keyword score and its
        places by similarity and by keyword score."""
        self._check_model()
        lists = []
        if method != "bm25":
            lists.append(self._vector.candidates(query))
        if method != "vector":
            lists.append(self._fulltext.candidates(query))
        merged = fusion.merge(lists)
        if method != "vector" and query.terms:
            merged = fusion.with_keywords(merged, query.terms, self.term_stats(query))
        return fusion.with_ranks(merged)

    def term_stats(self, query: Query) -> TermStats:
        return self._stats.stats(query.user_id, query.terms)

    def _shape(
        self, request: SearchRequest, ranked: list[Ranked], method: SearchMethod, source: str
    ) -> list[SearchResult]:
        neighbours: dict[str, Neighbours] = {}
        if request.neighbours and ranked and source == "neo4j":
            found = self._store.neighbours(request.user_id, [r.hit.id for r in ranked], request.neighbours)
            neighbours = {key: Neighbours(tuple(b), tuple(a)) for key, (b, a) in found.items()}
        shaped = results(ranked, method, neighbours)
        if request.token_budget is not None:
            shaped = within_budget(shaped, request.token_budget)
        return shaped

    def _check_model(self) -> None:
        """Vectors of two models are never compared: the store's model is read again at most
        every ``model_check_interval_s`` (a migration's switch waits longer than that before it
        changes a vector), and a refusal is never cached."""
        now = time.monotonic()
        if now < self._model_checked_until:
            return
        self._store.check_search_model(self._embedder.model_name, self._embedder.dimension)
        self._model_checked_until = now + self._settings.model_check_interval_s

    def _backup_candidates(self, query: Query, neo4j_error: ServiceUnavailable) -> list[Candidate]:
        assert self._backup is not None
        try:
            return fusion.with_ranks(self._backup.candidates(query))
        except ServiceUnavailable as exc:
            raise ServiceUnavailable(
                f"neo4j,{exc.service}",
                f"neo4j: {neo4j_error.detail}; and the {exc.service} fallback: {exc.detail}",
                neo4j_error.hint,
            ) from exc
