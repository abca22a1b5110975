"""Search: query embedding → candidates → threshold → dedup → ranking → top_k.

Candidates come from Neo4j; when Neo4j is unreachable, from Qdrant through a ``BackupCandidates``
(the same tenant and filters), and the response says so. Either way one pure ``rank`` turns them
into results, so a threshold, the dedup and the nudges mean the same whichever store answered.

Every candidate carries its true cosine similarity to the query: the vector index's own score is
turned back from ``(1 + cos) / 2``, and fulltext hits get theirs computed in the same query. So a
threshold means the same thing whichever index found the memory, and fusion is a nudge on top of
similarity (``search_fulltext_weight`` times the hit's share of the best fulltext score) rather
than a rank-only blend.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from pydantic import ValidationError

from shared.embedding.base import Embedder, Vectors
from shared.errors import ServiceUnavailable
from shared.models import Memory, SearchFilters, SearchRequest, SearchResponse, SearchResult, utc_now
from shared.settings import Settings

log = logging.getLogger(__name__)
_WORD = re.compile(r"\w+", re.UNICODE)
_LUCENE_OPERATORS = {"AND", "OR", "NOT", "TO"}


# Lucene refuses a query of more than 1,024 clauses, and its analyser makes a clause of every
# CJK character: a query's words are kept to this many characters in all, hence clauses.
FULLTEXT_MAX_CHARS = 512
FULLTEXT_MAX_WORDS = 64


def fulltext_query(text: str) -> str | None:
    """The query's words as a plain Lucene OR-query: no operator or syntax from the user survives,
    and never more clauses than Lucene takes (a long query is cut, not refused)."""
    words: list[str] = []
    room = FULLTEXT_MAX_CHARS
    for word in _WORD.findall(text)[:FULLTEXT_MAX_WORDS]:
        if room <= 0:
            break
        word = word[:room]
        room -= len(word)
        words.append(word.lower() if word in _LUCENE_OPERATORS else word)
    return " ".join(words) or None


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


@dataclass(frozen=True, slots=True)
class Candidate:
    """A Memory one source found for the query, with its true cosine similarity to it."""

    memory: Mapping[str, Any]
    """The Memory's fields (at least those a ``SearchResult`` shows, and ``content_hash``)."""
    similarity: float
    text_score: float | None = None
    """The fulltext index's score, when that index found it."""


class GraphCandidates(Protocol):
    """What the Searcher asks of the primary store (``Neo4jStore``)."""

    def check_search_model(self, model: str, dimension: int) -> None:
        """Raises ``ModelMigration`` unless the store holds vectors of this model and is not
        switching models (and makes the schema on a new store)."""
        ...

    def vector_candidates(
        self, vector: Sequence[float], k: int, filters: dict[str, Any]
    ) -> list[dict[str, Any]]: ...

    def exact_candidates(
        self, vector: Sequence[float], k: int, filters: dict[str, Any]
    ) -> list[dict[str, Any]]: ...

    def fulltext_candidates(
        self, text: str, vector: Sequence[float], k: int, filters: dict[str, Any]
    ) -> list[dict[str, Any]]: ...


class BackupCandidates(Protocol):
    """The nearest Memories from Qdrant, with the same tenant and filters, when Neo4j is down."""

    def candidates(
        self, vector: list[float], user_id: str, filters: SearchFilters, limit: int, timeout_s: float
    ) -> list[Candidate]:
        """Raises ``ServiceUnavailable`` at once when Qdrant cannot answer within ``timeout_s``."""
        ...


class NearestMemories(Protocol):
    """A vector store searched directly (``QdrantStore``): (payload, cosine similarity) pairs."""

    def search(
        self, vector: Sequence[float], user_id: str, filters: SearchFilters, limit: int
    ) -> list[tuple[dict[str, Any], float]]: ...


def backup_candidates(hits: Iterable[tuple[Mapping[str, Any], float]]) -> list[Candidate]:
    """Qdrant's hits as candidates: each payload read as a ``Memory`` (its ``created_at`` a
    datetime again); a point whose payload is not one is left out."""
    candidates: list[Candidate] = []
    for payload, similarity in hits:
        try:
            memory = Memory.model_validate(payload)
        except ValidationError as exc:
            log.warning("qdrant point %s has no Memory payload: %s", payload.get("id"), exc)
            continue
        candidates.append(Candidate(memory.model_dump(), similarity))
    return candidates


class VectorBackup:
    """The backup searched in this process: a Qdrant server, or the embedded folder it owns."""

    def __init__(self, store: NearestMemories) -> None:
        self._store = store

    def candidates(
        self, vector: list[float], user_id: str, filters: SearchFilters, limit: int, timeout_s: float
    ) -> list[Candidate]:
        """Bounded by the client's own timeout (``ENGRAM_QDRANT_TIMEOUT_S``), not ``timeout_s``."""
        return backup_candidates(self._store.search(vector, user_id, filters, limit))


def rank(
    candidates: Iterable[Candidate],
    threshold: float | None,
    top_k: int,
    settings: Settings,
    now: datetime,
) -> list[SearchResult]:
    """Fusion, threshold, ranking, dedup by content hash, top_k: the same for every source.

    A Memory found twice keeps the similarity it was first found with (the vector index's comes
    first) and the fulltext score it was found with; fulltext nudges by its share of the best one.
    """
    s = settings
    memories: dict[str, Mapping[str, Any]] = {}
    similarity: dict[str, float] = {}
    text_scores: dict[str, float] = {}
    for candidate in candidates:
        memory_id = candidate.memory["id"]
        memories.setdefault(memory_id, candidate.memory)
        similarity.setdefault(memory_id, candidate.similarity)
        if candidate.text_score is not None:
            text_scores[memory_id] = candidate.text_score
    best_text = max(text_scores.values(), default=0.0) or 1.0

    scored: list[tuple[float, float, Mapping[str, Any]]] = []
    for memory_id, memory in memories.items():
        sim = similarity[memory_id]
        if threshold is not None and sim < threshold:
            continue
        score = sim + s.search_fulltext_weight * text_scores.get(memory_id, 0.0) / best_text
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


class Searcher:
    """Embeds the query, takes candidates from Neo4j or, when Neo4j is down, from the backup, and
    ranks them with ``rank``: the response's ``source`` and ``degraded`` say which answered."""

    def __init__(
        self,
        store: GraphCandidates,
        embedder: Embedder,
        settings: Settings,
        backup: BackupCandidates | None = None,
    ) -> None:
        self._store = store
        self._embedder = embedder
        self._settings = settings
        self._backup = backup
        self._queries = QueryEmbeddingCache(embedder, settings.query_cache_size)
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

        source: Literal["neo4j", "qdrant"] = "neo4j"
        degraded = None
        try:
            candidates = self._graph_candidates(request, vector, top_k)
        except ServiceUnavailable as exc:
            if exc.service != "neo4j" or self._backup is None:
                raise
            source, degraded = "qdrant", f"neo4j unavailable: {exc.detail}"
            candidates = self._backup_candidates(request, vector, top_k, exc, deadline)
        results = rank(candidates, threshold, top_k, s, utc_now())
        finished = time.perf_counter()

        return SearchResponse(
            query=request.query,
            results=results,
            count=len(results),
            embedding_time_ms=round((embedded - started) * 1000, 2),
            search_time_ms=round((finished - embedded) * 1000, 2),
            source=source,
            degraded=degraded,
        )

    def _graph_candidates(self, request: SearchRequest, vector: list[float], top_k: int) -> list[Candidate]:
        s = self._settings
        self._check_model()
        filters = filter_params(request)
        candidates = [
            Candidate(row["memory"], row["score"]) for row in self._vector_candidates(vector, top_k, filters)
        ]
        text = fulltext_query(request.query) if s.search_fulltext_weight > 0 else None
        if text:
            rows = self._store.fulltext_candidates(text, vector, top_k * s.search_oversample, filters)
            candidates += [_text_candidate(row) for row in rows]
        return candidates

    def _check_model(self) -> None:
        """Vectors of two models are never compared: the store's model is read again at most
        every ``model_check_interval_s`` (a migration's switch waits longer than that before it
        changes a vector), and a refusal is never cached."""
        now = time.monotonic()
        if now < self._model_checked_until:
            return
        self._store.check_search_model(self._embedder.model_name, self._embedder.dimension)
        self._model_checked_until = now + self._settings.model_check_interval_s

    def _backup_candidates(
        self,
        request: SearchRequest,
        vector: list[float],
        top_k: int,
        neo4j_error: ServiceUnavailable,
        deadline: float | None,
    ) -> list[Candidate]:
        assert self._backup is not None
        timeout_s = self._settings.search_timeout_s if deadline is None else deadline - time.monotonic()
        limit = top_k * self._settings.search_oversample
        try:
            return self._backup.candidates(
                vector, request.user_id, request.filters, limit, max(timeout_s, 0.0)
            )
        except ServiceUnavailable as exc:
            raise ServiceUnavailable(
                f"neo4j,{exc.service}",
                f"neo4j: {neo4j_error.detail}; and the {exc.service} fallback: {exc.detail}",
                neo4j_error.hint,
            ) from exc

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
        """``rank`` over Neo4j's rows: vector rows scored in cosine, fulltext rows as Neo4j scores."""
        candidates = [Candidate(row["memory"], row["score"]) for row in vector_rows]
        candidates += [_text_candidate(row) for row in text_rows]
        return rank(candidates, threshold, top_k, self._settings, utc_now())


def _text_candidate(row: dict[str, Any]) -> Candidate:
    """A fulltext row: Neo4j's cosine, (1 + cos) / 2, turned back into cosine."""
    return Candidate(row["memory"], 2.0 * row["score"] - 1.0, row["text_score"])


def _recency(created_at: Any, now: datetime, half_life_days: float) -> float:
    if not isinstance(created_at, datetime):
        return 0.0
    age_days = max((now - created_at).total_seconds(), 0.0) / 86400
    return math.pow(0.5, age_days / half_life_days)


def _result(memory: Mapping[str, Any], similarity: float, score: float) -> SearchResult:
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
