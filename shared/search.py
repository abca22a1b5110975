"""Search over Neo4j: query embedding → candidates → threshold → dedup → ranking → top_k.

Every candidate carries its true cosine similarity to the query: the vector index's own score is
turned back from ``(1 + cos) / 2``, and fulltext hits get theirs computed in the same query. So a
threshold means the same thing whichever index found the memory, and fusion is a nudge on top of
similarity (``search_fulltext_weight`` times the hit's share of the best fulltext score) rather
than a rank-only blend.
"""

from __future__ import annotations

import math
import re
import time
from collections import OrderedDict
from datetime import datetime
from typing import Any

from shared.embedding.base import Embedder, Vectors
from shared.models import SearchRequest, SearchResponse, SearchResult, utc_now
from shared.settings import Settings
from shared.stores.neo4j import Neo4jStore

_WORD = re.compile(r"\w+", re.UNICODE)
_LUCENE_OPERATORS = {"AND", "OR", "NOT", "TO"}


def fulltext_query(text: str) -> str | None:
    """The query's words as a plain Lucene OR-query: no operator or syntax from the user survives."""
    words = [w.lower() if w in _LUCENE_OPERATORS else w for w in _WORD.findall(text)]
    return " ".join(words[:64]) or None


def filter_params(request: SearchRequest) -> dict[str, Any]:
    f = request.filters
    return {
        "user_id": request.user_id,
        "project_id": f.project_id,
        "session_id": f.session_id,
        "document_id": f.document_id,
        "memory_types": f.memory_types,
        "tags": f.tags,
        "from_date": f.from_date,
        "to_date": f.to_date,
    }


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


class Searcher:
    def __init__(self, store: Neo4jStore, embedder: Embedder, settings: Settings) -> None:
        self._store = store
        self._settings = settings
        self._queries = QueryEmbeddingCache(embedder, settings.query_cache_size)

    def search(self, request: SearchRequest) -> SearchResponse:
        s = self._settings
        top_k = min(request.top_k or s.search_default_top_k, s.search_max_top_k)
        threshold = s.search_default_threshold if request.threshold is None else request.threshold

        started = time.perf_counter()
        vector = self._queries.embed(request.query).tolist()
        embedded = time.perf_counter()

        filters = filter_params(request)
        candidates = self._vector_candidates(vector, top_k, filters)
        text = fulltext_query(request.query) if s.search_fulltext_weight > 0 else None
        text_hits = (
            self._store.fulltext_candidates(text, vector, top_k * s.search_oversample, filters)
            if text
            else []
        )
        results = self._rank(candidates, text_hits, threshold, top_k)
        finished = time.perf_counter()

        return SearchResponse(
            query=request.query,
            results=results,
            count=len(results),
            embedding_time_ms=round((embedded - started) * 1000, 2),
            search_time_ms=round((finished - embedded) * 1000, 2),
        )

    def _vector_candidates(
        self, vector: list[float], top_k: int, filters: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """The index is filtered after it answers, so a selective filter can leave fewer than
        top_k; then the filtered set is scanned exactly, which is complete and, being selective,
        small."""
        k = top_k * self._settings.search_oversample
        rows = self._store.vector_candidates(vector, k, filters)
        if len(rows) < top_k:
            rows = self._store.exact_candidates(vector, k, filters)
        for row in rows:
            row["score"] = 2.0 * row["score"] - 1.0
        return rows

    def _rank(
        self,
        vector_rows: list[dict[str, Any]],
        text_rows: list[dict[str, Any]],
        threshold: float | None,
        top_k: int,
    ) -> list[SearchResult]:
        s = self._settings
        best_text = max((row["text_score"] for row in text_rows), default=0.0) or 1.0
        similarity: dict[str, float] = {}
        text_share: dict[str, float] = {}
        memories: dict[str, dict[str, Any]] = {}
        for row in vector_rows:
            memory = row["memory"]
            memories[memory["id"]] = memory
            similarity[memory["id"]] = row["score"]
        for row in text_rows:
            memory = row["memory"]
            memories.setdefault(memory["id"], memory)
            similarity.setdefault(memory["id"], 2.0 * row["score"] - 1.0)
            text_share[memory["id"]] = row["text_score"] / best_text

        now = utc_now()
        scored: list[tuple[float, float, dict[str, Any]]] = []
        for memory_id, memory in memories.items():
            sim = similarity[memory_id]
            if threshold is not None and sim < threshold:
                continue
            score = sim + s.search_fulltext_weight * text_share.get(memory_id, 0.0)
            importance = memory.get("importance")
            score += s.search_importance_weight * ((0.5 if importance is None else float(importance)) - 0.5)
            score += s.search_recency_weight * _recency(
                memory.get("created_at"), now, s.search_recency_half_life_days
            )
            score += s.search_memory_type_weights.get(str(memory.get("memory_type")), 0.0)
            scored.append((score, sim, memory))
        scored.sort(key=lambda item: (item[0], item[1]), reverse=True)

        results: list[SearchResult] = []
        seen_content: set[str] = set()
        for score, sim, memory in scored:
            if memory.get("content_hash") in seen_content:
                continue
            seen_content.add(memory.get("content_hash") or memory["id"])
            results.append(_result(memory, sim, score))
            if len(results) == top_k:
                break
        return results


def _recency(created_at: Any, now: datetime, half_life_days: float) -> float:
    if not isinstance(created_at, datetime):
        return 0.0
    age_days = max((now - created_at).total_seconds(), 0.0) / 86400
    return math.pow(0.5, age_days / half_life_days)


def _result(memory: dict[str, Any], similarity: float, score: float) -> SearchResult:
    return SearchResult(
        id=memory["id"],
        content=memory["content"],
        similarity_score=round(similarity, 6),
        score=round(score, 6),
        memory_type=memory.get("memory_type") or "document",
        importance=float(memory.get("importance") or 0.0),
        document_id=memory["document_id"],
        chunk_index=int(memory["chunk_index"]),
        title=memory.get("title"),
        session_id=memory.get("session_id"),
        project_id=memory.get("project_id"),
        tags=list(memory.get("tags") or []),
        created_at=memory.get("created_at"),
    )
