"""The search: query embedding → candidates → keyword scores → fusion → ranking → shaping.

Candidates come from Neo4j (vector and fulltext sources); when Neo4j is unreachable, from Qdrant
(vectors alone), and the response says so. Either way the same pure functions fuse, rank and
shape them, so a threshold, the dedup and the nudges mean the same whichever store answered.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from typing import Literal

from shared.embedding.base import Embedder, Vectors
from shared.errors import ServiceUnavailable
from shared.models import SearchMethod, SearchRequest, SearchResponse, SearchResult, utc_now
from shared.search import fusion
from shared.search.agentic import ChatJudge, Judge, fuse_rounds
from shared.search.bm25 import TermStats
from shared.search.graph_sources import CandidateExpander, graph_expanders
from shared.search.ranking import RankingPolicy, rank
from shared.search.records import Candidate, Fused, Ranked
from shared.search.rerank import HttpReranker, Reranker, reranked
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
from shared.search.text import query_head, query_terms
from shared.search.timeframe import Timeframe, read_again, timeframe
from shared.settings import Settings

log = logging.getLogger(__name__)


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


def query_of(
    request: SearchRequest, said: str, vector: list[float], s: Settings, deadline: float | None = None
) -> Query:
    """What every source reads of a search: ``said`` (the query's head, ``query_head``) embedded
    as ``vector``, its words, the request's ``top_k`` within the settings' bound and the fusion
    pool, ``ENGRAM_SEARCH_OVERSAMPLE`` candidates a result."""
    top_k = min(request.top_k or s.search_default_top_k, s.search_max_top_k)
    return Query(
        text=said,
        vector=vector,
        user_id=request.user_id,
        filters=request.filters,
        top_k=top_k,
        pool=top_k * s.search_oversample,
        terms=query_terms(said),
        deadline=deadline,
    )


def fuse(
    method: SearchMethod, candidates: Sequence[Candidate], s: Settings, keyword_weight: float = 0.0
) -> list[Fused]:
    """The fused scores of one method. ``engram`` is the configured fusion (``keyword_weight``:
    the query's own, for ``adaptive``); the others are fixed baselines (engram eval compares
    them), never tuned per query."""
    if method == "vector":
        return fusion.vector_only(candidates)
    if method == "bm25":
        return fusion.keyword_only(candidates)
    if method == "rrf":
        return fusion.rrf(candidates, k=60, keyword_weight=0.5)
    if method == "weighted_rrf" or s.search_fusion == "rrf":
        return fusion.rrf(candidates, k=s.search_rrf_k, keyword_weight=s.search_keyword_ratio)
    if method == "blend" or s.search_fusion == "blend":
        return fusion.blend(candidates, s.search_keyword_ratio)
    return fusion.adaptive(candidates, keyword_weight)  # engram


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
        reranker: Reranker | None = None,
        judge: Judge | None = None,
        expanders: Sequence[CandidateExpander] | None = None,
    ) -> None:
        s = settings
        self._store = store
        self._embedder = embedder
        self._settings = s
        self._vector: CandidateSource = Neo4jVector(
            store,
            s.search_exact_scan_limit,
            s.search_vector_max_k,
            s.search_stats_ttl_s,
            s.search_vector_min_k,
        )
        self._fulltext: CandidateSource = Neo4jFulltext(store, s.search_fulltext_max_candidates)
        self._backup: CandidateSource | None = None if backup is None else Qdrant(backup, s.search_timeout_s)
        self._stats = TenantStats(store, s.search_stats_ttl_s)
        self._queries = QueryEmbeddingCache(embedder, s.query_cache_size)
        self._model_checked_until = 0.0
        self._reranker = reranker if reranker is not None else _reranker(s)
        self._judge = judge if judge is not None else _judge(s)
        # The sources, the keyword statistics, the model check and the time the query names.
        self._reads = ThreadPoolExecutor(max_workers=5, thread_name_prefix="search-read")
        self._expanders = list(expanders) if expanders is not None else graph_expanders(store, s)

    def search(self, request: SearchRequest, deadline: float | None = None) -> SearchResponse:
        """``deadline`` (``time.monotonic``) is when the caller stops waiting; the backup gets
        what is left of it, else the search timeout."""
        s = self._settings
        threshold = s.search_default_threshold if request.threshold is None else request.threshold

        started = time.perf_counter()
        # Every stage reads the query's head: its cost is bounded whatever the query's length.
        said = query_head(request.query, s.search_query_max_words)
        # The time the query names (dateparser, and the tenant's newest memory when it names one)
        # is read while the query is embedded and the candidates come.
        named = self._reads.submit(self._timeframe, said, request.now, request.method, request.user_id)
        vector = self._queries.embed(said).tolist()
        embedded = time.perf_counter()

        query = query_of(request, said, vector, s, deadline)
        top_k = query.top_k
        method = request.method
        source: Literal["neo4j", "qdrant"] = "neo4j"
        degraded = None
        try:
            candidates = self.candidates(query, method)
        except ServiceUnavailable as exc:
            if exc.service != "neo4j" or self._backup is None:
                raise
            # The reason stays in the worker's log: a tenant learns the primary is down, not where it is.
            log.warning("search falls back to qdrant: neo4j unavailable: %s", exc.detail)
            source, degraded = "qdrant", "neo4j unavailable"
            candidates = self._backup_candidates(query, exc)
            method = "vector"  # no keyword scores without Neo4j
        policy = RankingPolicy.from_settings(s, threshold, named.result() if source == "neo4j" else None)
        weight = self.keyword_weight(query, method)
        fused = fuse(method, candidates, s, weight)
        if method == "engram" and source == "neo4j":  # the graph's re-scorers (graph_sources.py)
            for expander in self._expanders:
                fused = expander.rescore(query, fused)
        ranked = rank(fused, policy, max(top_k, self._head(method)), utc_now())
        follow_ups: list[str] = []
        if method == "engram" and source == "neo4j":
            ranked, follow_ups = self._second_round(query, ranked, policy)
            ranked = self._reranked(said, ranked)
        found = self._shape(request, ranked[:top_k], method, source)
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
            rounds=2 if follow_ups else 1,
            follow_up_queries=follow_ups,
            context=text,
            context_tokens=tokens,
        )

    def warm(self) -> None:
        """Loads what a first search would otherwise: the model's session, dateparser's data
        (seconds), a connection to Neo4j and the store's model."""
        self._embedder.embed_query("warm up")
        timeframe("what was said on 1 May 2023", utc_now())
        self._check_model()

    def candidates(self, query: Query, method: SearchMethod) -> list[Candidate]:
        """Every source the method reads, merged, each candidate with its keyword score and its
        places by similarity and by keyword score."""
        # The sources, the tenant's keyword statistics and the store's model (when due) are
        # independent reads: asked at once, a search waits for the slowest rather than their sum.
        # The model's refusal still comes first: no candidates are used from a store it refuses.
        due = time.monotonic() >= self._model_checked_until
        check = self._reads.submit(self._check_model) if due else None
        sources = ((self._vector, method != "bm25"), (self._fulltext, method != "vector"))
        wanted = [source for source, on in sources if on]
        keywords = method != "vector" and bool(query.terms)
        stats = self._reads.submit(self.term_stats, query) if keywords else None
        try:
            lists = list(self._reads.map(lambda source: source.candidates(query), wanted))
        finally:
            if check is not None:
                check.result()
        merged = fusion.merge(lists)
        if method == "engram":  # the graph's sources the settings switch on (graph_sources.py)
            merged = fusion.merge([merged, *[e.expand(query, merged) for e in self._expanders]])
        if stats is not None:
            merged = fusion.with_keywords(merged, query.terms, stats.result())
        merged = fusion.with_ranks(merged)
        if method == "engram" and self._feedback_on(query) and merged:
            merged = self._feedback(query, merged)
        return merged

    def keyword_weight(self, query: Query, method: SearchMethod) -> float:
        """The adaptive fusion's keyword weight for this query: from how rare its rarest word is
        among the tenant's memories (the statistics the keyword scores used, cached)."""
        s = self._settings
        if method not in ("engram", "blend", "weighted_rrf") or not query.terms:
            return 0.0
        rarity = fusion.rarity(query.terms, self.term_stats(query))
        return fusion.rarity_weight(
            rarity, s.search_keyword_weight_max, s.search_rarity_low, s.search_rarity_high
        )

    def _feedback_on(self, query: Query) -> bool:
        """Feedback for a query of common words only (its keyword weight low): one of rare words
        is found by them, and moving its vector toward its first results drifts it."""
        s = self._settings
        return s.search_feedback_weight > 0 and (
            self.keyword_weight(query, "engram") <= s.search_feedback_max_keyword_weight
        )

    def _timeframe(
        self, text: str, now: datetime | None, method: SearchMethod, user_id: str
    ) -> Timeframe | None:
        """The time the query names, read relative to the request's ``now``, else to the tenant's
        newest memory (asked only when the query names a time). Engram's own search only: the
        baselines stay fixed."""
        if method != "engram" or not self._settings.search_time_weight:
            return None
        named = timeframe(text, now or utc_now())
        if named is None or now is not None:
            return named
        newest = self._store.newest_memory(user_id)
        return named if newest is None else read_again(named, text, newest)

    def _feedback(self, query: Query, first: list[Candidate]) -> list[Candidate]:
        """Pseudo-relevance feedback (Rocchio): the query vector is moved toward the vectors of
        the first round's best fused memories and the vector source is asked again; every
        candidate of both rounds then carries its cosine with the moved vector, which fusion
        reads, beside its true similarity to the query, which thresholds and explanations read."""
        s = self._settings
        weight = self.keyword_weight(query, "engram")
        fused = sorted(fuse("engram", first, s, weight), key=lambda f: (-f.fused, f.candidate.hit.id))
        best = [f.candidate.hit.id for f in fused[: s.search_feedback_docs]]
        # One read moves the vector and scores the first round's candidates with it; only the
        # index's new candidates for the moved vector (when asked for) need a read of their own.
        ids = [c.hit.id for c in first]
        unit = fusion.unit(query.vector)
        moved, scores = self._store.feedback_scores(query.user_id, best, ids, unit, s.search_feedback_weight)
        merged = first
        if s.search_feedback_expand:
            second = self._vector.candidates(replace(query, vector=fusion.unit(moved)))
            merged = fusion.merge([first, second])
            unscored = [c.hit.id for c in merged if c.hit.id not in scores]
            if unscored:
                scores.update(self._store.two_scores(query.user_id, unscored, query.vector, moved))
        rescored = [
            replace(c, similarity=2.0 * scores[c.hit.id][0] - 1.0, feedback=2.0 * scores[c.hit.id][1] - 1.0)
            for c in merged
            if c.hit.id in scores
        ]
        if query.terms:
            # The first round scored its candidates for these words; only the new ones need it.
            new = [c for c in rescored if c.keyword is None]
            scored = {c.hit.id: c for c in fusion.with_keywords(new, query.terms, self.term_stats(query))}
            rescored = [scored.get(c.hit.id, c) for c in rescored]
        return fusion.with_ranks(rescored)

    def _head(self, method: SearchMethod) -> int:
        """Results ranked before the reranker cuts to top_k."""
        return self._settings.search_rerank_top_n if method == "engram" and self._reranker else 0

    def _reranked(self, text: str, ranked: list[Ranked]) -> list[Ranked]:
        if self._reranker is None:
            return ranked
        try:
            return reranked(text, ranked, self._reranker, self._settings.search_rerank_top_n)
        except ServiceUnavailable as exc:
            log.warning("reranker unavailable, fused order kept: %s", exc.detail)
            return ranked

    def _second_round(
        self, query: Query, ranked: list[Ranked], policy: RankingPolicy
    ) -> tuple[list[Ranked], list[str]]:
        """Seed 002: the judge reads the first results; if they do not suffice, each follow-up
        query is searched like the first and the rounds are merged by reciprocal rank fusion."""
        if self._judge is None or not ranked:
            return ranked, []
        try:
            verdict = self._judge.judge(query.text, [r.hit.content for r in ranked[: query.top_k]])
        except ServiceUnavailable as exc:
            log.warning("agentic round skipped: %s", exc.detail)
            return ranked, []
        if verdict.sufficient:
            return ranked, []
        rounds = [ranked]
        for said in verdict.queries:
            text = query_head(said, self._settings.search_query_max_words)
            follow = replace(
                query, text=text, vector=self._queries.embed(text).tolist(), terms=query_terms(text)
            )
            weight = self.keyword_weight(follow, "engram")
            fused = fuse("engram", self.candidates(follow, "engram"), self._settings, weight)
            rounds.append(rank(fused, policy, len(ranked), utc_now()))
        return fuse_rounds(rounds, self._settings.search_rrf_k)[: len(ranked)], verdict.queries

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


def _secret(value: object) -> str | None:
    getter = getattr(value, "get_secret_value", None)
    return getter() if callable(getter) else None


def _reranker(s: Settings) -> Reranker | None:
    if s.search_reranker_url is None:
        return None
    return HttpReranker(
        s.search_reranker_url,
        s.search_reranker_api,
        s.search_reranker_model,
        _secret(s.search_reranker_api_key),
        timeout_s=s.search_timeout_s / 4,
    )


def _judge(s: Settings) -> Judge | None:
    if s.search_agent_url is None:
        return None
    return ChatJudge(
        s.search_agent_url,
        s.search_agent_model,
        s.search_agent_api,
        _secret(s.search_agent_api_key),
        s.search_agent_max_queries,
        timeout_s=s.search_timeout_s / 2,
    )
