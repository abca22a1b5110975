"""An in-memory ``SearchStore``: memories with vectors, searched as Neo4j would search them (an
index that returns the k nearest of every tenant before the filters, a fulltext index whose limit
counts the tenant's matches), and counting what it was asked."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from shared.search.fusion import feedback_vector
from shared.search.text import tenant_token, tokens

_LUCENE = re.compile(r"tenant_token:(\d+) AND content:(.*)")
_PHRASE = re.compile(r'"((?:[^"\\]|\\.)*)"')


@dataclass
class Stored:
    id: str
    user_id: str
    content: str
    vector: np.ndarray
    document_id: str = ""
    chunk_index: int = 0
    memory_type: str = "document"
    session_id: str | None = None
    project_id: str | None = None
    tags: list[str] = field(default_factory=list)
    importance: float = 0.5
    content_hash: str | None = None
    status: str = "active"
    created_at: datetime | None = None

    def fields(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "content": self.content,
            "content_hash": self.content_hash or f"hash-{self.id}",
            "memory_type": self.memory_type,
            "importance": self.importance,
            "document_id": self.document_id or self.id,
            "chunk_index": self.chunk_index,
            "token_count": len(tokens(self.content)),
            "session_id": self.session_id,
            "project_id": self.project_id,
            "tags": self.tags,
            "created_at": self.created_at,
        }


class FakeSearchStore:
    def __init__(self, memories: Sequence[Stored] = ()) -> None:
        self.memories = list(memories)
        self.asked: list[tuple[str, int]] = []
        self.tenant_inside = False  # the index holds the tenant (Neo4j 2026.02+)

    def add(self, *memories: Stored) -> None:
        self.memories.extend(memories)

    def check_search_model(self, model: str, dimension: int) -> None:
        pass

    def _passes(self, m: Stored, f: Mapping[str, Any]) -> bool:
        return (
            m.user_id == f["user_id"]
            and f["project_id"] in (None, m.project_id)
            and f["session_id"] in (None, m.session_id)
            and f["document_id"] in (None, m.document_id or m.id)
            and (f["memory_types"] is None or m.memory_type in f["memory_types"])
            and (f["tags"] is None or any(t in f["tags"] for t in m.tags))
            and (f["statuses"] is None or m.status in f["statuses"])
        )

    def _cos(self, m: Stored, vector: Sequence[float]) -> float:
        v = np.asarray(vector)
        return float(m.vector @ v / (np.linalg.norm(m.vector) * np.linalg.norm(v)))

    def _row(self, m: Stored, vector: Sequence[float]) -> dict[str, Any]:
        return {"memory": m.fields(), "score": (1.0 + self._cos(m, vector)) / 2.0}

    def tenant_in_vector_index(self) -> bool:
        return self.tenant_inside

    def count_filtered(self, filters: dict[str, Any], limit: int) -> int:
        self.asked.append(("count", limit))
        return min(sum(self._passes(m, filters) for m in self.memories), limit)

    def vector_candidates(
        self, vector: Sequence[float], k: int, filters: dict[str, Any], keep: int
    ) -> tuple[int, list[dict[str, Any]]]:
        self.asked.append(("vector", k))
        held = [m for m in self.memories if not self.tenant_inside or m.user_id == filters["user_id"]]
        nearest = sorted(held, key=lambda m: -self._cos(m, vector))[:k]
        return len(nearest), [self._row(m, vector) for m in nearest if self._passes(m, filters)][:keep]

    def exact_candidates(
        self, vector: Sequence[float], k: int, filters: dict[str, Any]
    ) -> list[dict[str, Any]]:
        self.asked.append(("exact", k))
        kept = [m for m in self.memories if self._passes(m, filters)]
        return [self._row(m, vector) for m in sorted(kept, key=lambda m: -self._cos(m, vector))[:k]]

    def _matches(self, lucene: str) -> list[Stored]:
        found = _LUCENE.fullmatch(lucene)
        assert found, lucene
        token = found.group(1)
        words = {w.replace('\\"', '"').replace("\\\\", "\\") for w in _PHRASE.findall(found.group(2))}
        return [
            m for m in self.memories if tenant_token(m.user_id) == token and words & set(tokens(m.content))
        ]

    def fulltext_candidates(
        self, text: str, vector: Sequence[float], k: int, filters: dict[str, Any]
    ) -> tuple[int, list[dict[str, Any]]]:
        self.asked.append(("fulltext", k))
        matches = self._matches(text)[:k]
        return len(matches), [self._row(m, vector) for m in matches if self._passes(m, filters)]

    def term_frequencies(self, user_id: str, queries: Mapping[str, str], cap: int) -> dict[str, int]:
        return {term: min(len(self._matches(lucene)), cap) for term, lucene in queries.items()}

    def tenant_stats(self, user_id: str) -> tuple[int, float]:
        own = [len(tokens(m.content)) for m in self.memories if m.user_id == user_id]
        return len(own), (sum(own) / len(own) if own else 0.0)

    def newest_memory(self, user_id: str) -> datetime | None:
        return max(
            (m.created_at for m in self.memories if m.user_id == user_id and m.created_at), default=None
        )

    def feedback_scores(
        self, user_id: str, best: Sequence[str], ids: Sequence[str], query: Sequence[float], weight: float
    ) -> tuple[list[float], dict[str, tuple[float, float]]]:
        vectors = [list(m.vector) for m in self.memories if m.id in best and m.user_id == user_id]
        moved = feedback_vector(query, vectors, weight)
        return moved, self.two_scores(user_id, ids, query, moved)

    def two_scores(
        self, user_id: str, ids: Sequence[str], query: Sequence[float], moved: Sequence[float]
    ) -> dict[str, tuple[float, float]]:
        return {
            m.id: ((1 + self._cos(m, query)) / 2, (1 + self._cos(m, moved)) / 2)
            for m in self.memories
            if m.id in ids and m.user_id == user_id
        }

    def neighbours(self, user_id: str, ids: Sequence[str], n: int) -> dict[str, tuple[list[str], list[str]]]:
        by_doc: dict[str, list[Stored]] = {}
        for m in self.memories:
            if m.user_id == user_id:
                by_doc.setdefault(m.document_id or m.id, []).append(m)
        found = {}
        for m in self.memories:
            if m.id in ids and m.user_id == user_id:
                chunks = sorted(by_doc[m.document_id or m.id], key=lambda c: c.chunk_index)
                place = chunks.index(m)
                found[m.id] = (
                    [c.content for c in chunks[max(0, place - n) : place]],
                    [c.content for c in chunks[place + 1 : place + 1 + n]],
                )
        return found


# Memories the search suites share: vectors drawn from one seeded generator, as test_searcher.py
# drew them before test_rerank_agentic.py shared them.
RNG = np.random.default_rng(7)


def stored(memory_id: str, user: str, content: str, **values: Any) -> Stored:
    return Stored(memory_id, user, content, RNG.normal(size=3), **values)


def small_tenant() -> list[Stored]:
    texts = ["an otter by the river", "river stones", "otter pups play", "a quiet lake", "the river otter"]
    return [stored(f"s{i}", "small", text, session_id=f"s{i % 2}") for i, text in enumerate(texts)]
