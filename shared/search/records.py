"""The typed records of a search: a Memory as a candidate, and a ranked result's explanation."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from shared.models import Memory, utc_from_micros
from shared.search.text import current_vector


@dataclass(frozen=True, slots=True)
class Hit:
    """The fields of a Memory a search reads and shows."""

    id: str
    content: str
    document_id: str
    chunk_index: int
    content_hash: str | None = None
    memory_type: str = "document"
    importance: float = 0.5
    token_count: int | None = None
    title: str | None = None
    session_id: str | None = None
    project_id: str | None = None
    tags: tuple[str, ...] = ()
    created_at: datetime | None = None
    term_vector: str | None = None
    """Its terms counted (``shared.search.text.term_vector``), when the store keeps them made
    the way they are made now."""

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Hit:
        """From a store's row of Memory fields (Neo4j's map projection)."""
        importance = row.get("importance")
        token_count = row.get("token_count")
        return cls(
            id=str(row["id"]),
            content=str(row.get("content") or ""),
            document_id=str(row.get("document_id") or ""),
            chunk_index=int(row.get("chunk_index") or 0),
            content_hash=row.get("content_hash"),
            memory_type=str(row.get("memory_type") or "document"),
            importance=0.5 if importance is None else float(importance),
            token_count=None if token_count is None else int(token_count),
            title=row.get("title"),
            session_id=row.get("session_id"),
            project_id=row.get("project_id"),
            tags=tuple(row.get("tags") or ()),
            created_at=_moment(row),
            term_vector=current_vector(row.get("term_vector")),
        )

    @classmethod
    def from_memory(cls, memory: Memory) -> Hit:
        return cls(
            id=memory.id,
            content=memory.content,
            document_id=memory.document_id,
            chunk_index=memory.chunk_index,
            content_hash=memory.content_hash,
            memory_type=memory.memory_type,
            importance=memory.importance,
            token_count=memory.token_count,
            title=memory.title,
            session_id=memory.session_id,
            project_id=memory.project_id,
            tags=tuple(memory.tags),
            created_at=memory.created_at,
        )


def _moment(row: dict[str, Any]) -> datetime | None:
    """A row's ``created_at``: a datetime, or epoch microseconds (``created_at_us``)."""
    if isinstance(row.get("created_at"), datetime):
        return row["created_at"]  # type: ignore[no-any-return]
    micros = row.get("created_at_us")
    return None if micros is None else utc_from_micros(int(micros))


@dataclass(frozen=True, slots=True)
class Candidate:
    """A Memory some source found for the query: its true cosine similarity to the query, and
    the places and scores each source gave it (none when that source did not find it)."""

    hit: Hit
    similarity: float
    vector_rank: int | None = None
    """1-based place in the vector source's list."""
    keyword_rank: int | None = None
    """1-based place in the keyword source's list (by ``keyword``)."""
    keyword: float | None = None
    """BM25 of the query's words in this memory, with the tenant's own statistics."""
    keyword_share: float | None = None
    """``keyword`` as a share of the most BM25 the query's words can give (``bm25_ceiling``)."""
    feedback: float | None = None
    """Cosine with the query vector moved toward the first round's best (pseudo-relevance
    feedback); fusion reads it in place of ``similarity`` when there is one."""

    @property
    def semantic(self) -> float:
        return self.similarity if self.feedback is None else self.feedback

    def merged(self, other: Candidate) -> Candidate:
        """The same Memory found by two sources: each keeps what it knows."""
        return replace(
            self,
            vector_rank=_least(self.vector_rank, other.vector_rank),
            keyword_rank=_least(self.keyword_rank, other.keyword_rank),
            keyword=self.keyword if self.keyword is not None else other.keyword,
            keyword_share=self.keyword_share if self.keyword_share is not None else other.keyword_share,
        )


def _least(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


@dataclass(frozen=True, slots=True)
class Fused:
    """A candidate with its fused score (before ranking nudges)."""

    candidate: Candidate
    fused: float


@dataclass(frozen=True, slots=True)
class Ranked:
    """A candidate with every part of its final score, for the result's explanation."""

    candidate: Candidate
    fused: float
    score: float
    nudges: dict[str, float] = field(default_factory=dict)
    rerank: float | None = None

    @property
    def hit(self) -> Hit:
        return self.candidate.hit
