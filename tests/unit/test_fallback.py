"""The search fallback with fakes: Neo4j down → Qdrant's candidates, ranked by the same functions."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from shared.errors import ServiceUnavailable
from shared.models import Memory, SearchFilters, SearchRequest
from shared.search import Candidate, Searcher, VectorBackup, backup_candidates, fuse
from shared.search.fusion import with_ranks
from shared.search.ranking import RankingPolicy, rank
from shared.settings import Settings
from tests.unit.fakes import FakeEmbedder

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def settings(**values: Any) -> Settings:
    return Settings(_env_file=None, **values)


def memory(memory_id: str, **values: Any) -> dict[str, Any]:
    """A Memory's fields, as a Qdrant payload holds them (JSON types, created_at as ISO text)."""
    fields: dict[str, Any] = {
        "id": memory_id,
        "document_key": f"key-{memory_id}",
        "document_id": f"doc-{memory_id}",
        "user_id": "alice",
        "chunk_index": 0,
        "content": f"content of {memory_id}",
        "key": f"key-{memory_id}",
        "content_hash": f"hash-{memory_id}",
        "token_count": 3,
        "created_at": "2025-12-01T00:00:00Z",
        "version": 1,
        "embedding_model": "test-model",
        "embedding_dim": 3,
        **values,
    }
    return Memory.model_validate(fields).model_dump(mode="json")


class DownGraph:
    """``SearchStore`` of an unreachable Neo4j."""

    def __init__(self) -> None:
        self.calls = 0

    def _down(self) -> Any:
        self.calls += 1
        raise ServiceUnavailable("neo4j", "Connection refused", "start it")

    def check_search_model(self, model: str, dimension: int) -> None:
        self._down()

    def count_filtered(self, filters: dict[str, Any], limit: int) -> int:
        return self._down()  # type: ignore[no-any-return]

    def tenant_in_vector_index(self) -> bool:
        return self._down()  # type: ignore[no-any-return]

    def vector_candidates(
        self, vector: Sequence[float], k: int, filters: dict[str, Any], keep: int
    ) -> tuple[int, list[dict[str, Any]]]:
        return self._down()  # type: ignore[no-any-return]

    def exact_candidates(
        self, vector: Sequence[float], k: int, filters: dict[str, Any]
    ) -> list[dict[str, Any]]:
        return self._down()  # type: ignore[no-any-return]

    def fulltext_candidates(
        self, text: str, vector: Sequence[float], k: int, filters: dict[str, Any]
    ) -> tuple[int, list[dict[str, Any]]]:
        return self._down()  # type: ignore[no-any-return]

    def term_frequencies(self, user_id: str, queries: Any, cap: int) -> dict[str, int]:
        return self._down()  # type: ignore[no-any-return]

    def tenant_stats(self, user_id: str) -> tuple[int, float]:
        return self._down()  # type: ignore[no-any-return]

    def newest_memory(self, user_id: str) -> Any:
        return self._down()

    def neighbours(self, user_id: str, ids: Sequence[str], n: int) -> dict[str, tuple[list[str], list[str]]]:
        return self._down()  # type: ignore[no-any-return]

    def feedback_scores(
        self, user_id: str, best: Sequence[str], ids: Sequence[str], query: Any, weight: float
    ) -> tuple[list[float], dict[str, tuple[float, float]]]:
        return self._down()  # type: ignore[no-any-return]

    def two_scores(
        self, user_id: str, ids: Sequence[str], query: Any, moved: Any
    ) -> dict[str, tuple[float, float]]:
        return self._down()  # type: ignore[no-any-return]


class UpGraph(DownGraph):
    """``SearchStore`` of a Neo4j that holds these rows (vector scores as the index gives them)
    and finds none of their words."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        super().__init__()
        self.rows = rows

    def check_search_model(self, model: str, dimension: int) -> None:
        pass

    def count_filtered(self, filters: dict[str, Any], limit: int) -> int:
        return len(self.rows)

    def tenant_in_vector_index(self) -> bool:
        return False

    def exact_candidates(
        self, vector: Sequence[float], k: int, filters: dict[str, Any]
    ) -> list[dict[str, Any]]:
        return [{**row, "memory": dict(row["memory"])} for row in self.rows]

    def fulltext_candidates(
        self, text: str, vector: Sequence[float], k: int, filters: dict[str, Any]
    ) -> tuple[int, list[dict[str, Any]]]:
        return 0, []

    def term_frequencies(self, user_id: str, queries: Any, cap: int) -> dict[str, int]:
        return {}

    def tenant_stats(self, user_id: str) -> tuple[int, float]:
        return len(self.rows), 3.0

    def newest_memory(self, user_id: str) -> Any:
        return None


class FakeQdrant:
    """``NearestMemories``: fixed hits, recording what it was asked."""

    def __init__(self, hits: list[tuple[dict[str, Any], float]]) -> None:
        self.hits = hits
        self.asked: list[tuple[str, SearchFilters, int]] = []

    def search(
        self, vector: Sequence[float], user_id: str, filters: SearchFilters, limit: int
    ) -> list[tuple[dict[str, Any], float]]:
        self.asked.append((user_id, filters, limit))
        return self.hits


class DownBackup:
    def __init__(self) -> None:
        self.timeouts: list[float] = []

    def candidates(
        self, vector: list[float], user_id: str, filters: SearchFilters, limit: int, timeout_s: float
    ) -> list[Candidate]:
        self.timeouts.append(timeout_s)
        raise ServiceUnavailable("qdrant", "no worker consumes the fallback queue", "start it")


def request(**values: Any) -> SearchRequest:
    return SearchRequest.model_validate({"query": "what grows", "user_id": "alice", **values})


# one ranking for every source


def _rank(
    candidates: list[Candidate], threshold: float | None = None, top_k: int = 10, **values: Any
) -> list[str]:
    policy = RankingPolicy.from_settings(settings(**values), threshold)
    return [r.hit.id for r in rank(fuse("vector", with_ranks(candidates), settings()), policy, top_k, NOW)]


def test_rank_orders_by_similarity_cuts_at_the_threshold_and_keeps_top_k() -> None:
    candidates = backup_candidates(
        [(memory(name), sim) for name, sim in [("low", 0.2), ("high", 0.9), ("mid", 0.5)]]
    )

    assert _rank(candidates, threshold=0.3, top_k=1) == ["high"]


def test_rank_returns_one_memory_per_content_hash_the_best_one() -> None:
    candidates = backup_candidates(
        [
            (memory("copy-a", content_hash="same"), 0.7),
            (memory("copy-b", content_hash="same"), 0.8),
            (memory("other"), 0.6),
        ]
    )

    assert _rank(candidates) == ["copy-b", "other"]


def test_rank_reads_the_recency_of_a_datetime_from_either_store() -> None:
    candidates = backup_candidates(
        [
            (memory("old", created_at="2020-01-01T00:00:00Z"), 0.5),
            (memory("new", created_at="2025-12-31T00:00:00Z"), 0.5),
        ]
    )

    assert _rank(candidates, search_recency_weight=0.2) == ["new", "old"]


def test_neo4j_rows_and_qdrant_hits_of_the_same_memories_rank_alike() -> None:
    # Given the same memories and cosines, as Neo4j's vector index scores them and as Qdrant does
    cosines = {"a": 0.81, "b": 0.42, "c": -0.1}
    rows = [
        {"memory": Memory.model_validate(memory(mid)).model_dump(), "score": (1.0 + cos) / 2.0}
        for mid, cos in cosines.items()
    ]
    hits = [(memory(mid), cos) for mid, cos in cosines.items()]
    embedder = FakeEmbedder()

    # When one searcher reads Neo4j (vectors alone, as the fallback can) and the other falls back
    from_graph = Searcher(UpGraph(rows), embedder, settings()).search(request(method="vector"))
    from_backup = Searcher(DownGraph(), embedder, settings(), VectorBackup(FakeQdrant(hits))).search(
        request()
    )

    # Then the results are the same, the scores the same cosines; only the source differs
    assert from_graph.results == from_backup.results
    assert [r.similarity_score for r in from_backup.results] == [0.81, 0.42, -0.1]
    assert (from_graph.source, from_graph.degraded) == ("neo4j", None)
    assert from_backup.source == "qdrant"


# Searcher: when and how it falls back


def test_neo4j_down_the_backup_answers_with_the_tenant_filters_and_the_reason() -> None:
    qdrant = FakeQdrant([(memory("m1"), 0.9)])
    searcher = Searcher(DownGraph(), FakeEmbedder(), settings(search_oversample=3), VectorBackup(qdrant))
    filters = {"project_id": "p", "tags": ["t"], "from_date": "2025-01-01T00:00:00Z"}

    answer = searcher.search(request(top_k=2, filters=filters))

    assert answer.source == "qdrant"
    assert answer.degraded == "neo4j unavailable"  # where it is stays in the log
    assert [r.id for r in answer.results] == ["m1"]
    assert answer.results[0].created_at == datetime(2025, 12, 1, tzinfo=UTC)
    assert qdrant.asked == [("alice", SearchFilters.model_validate(filters), 6)]


def test_a_payload_that_is_no_memory_is_left_out() -> None:
    candidates = backup_candidates([({"id": "broken"}, 0.9), (memory("fine"), 0.5)])

    assert [c.hit.id for c in candidates] == ["fine"]


def test_both_down_is_one_service_unavailable_naming_both() -> None:
    backup = DownBackup()
    searcher = Searcher(DownGraph(), FakeEmbedder(), settings(search_timeout_s=7.0), backup)

    with pytest.raises(ServiceUnavailable) as caught:
        searcher.search(request())

    assert caught.value.service == "neo4j,qdrant"
    assert "Connection refused" in caught.value.detail and "fallback queue" in caught.value.detail
    assert backup.timeouts == [7.0]  # no deadline given: the search timeout


def test_the_backup_gets_what_is_left_of_the_deadline() -> None:
    import time

    backup = DownBackup()
    searcher = Searcher(DownGraph(), FakeEmbedder(), settings(), backup)

    with pytest.raises(ServiceUnavailable):
        searcher.search(request(), deadline=time.monotonic() + 2.0)

    assert 1.5 < backup.timeouts[0] <= 2.0


def test_without_a_backup_or_for_another_service_the_error_stands() -> None:
    with pytest.raises(ServiceUnavailable) as caught:
        Searcher(DownGraph(), FakeEmbedder(), settings()).search(request())
    assert caught.value.service == "neo4j"

    class RedisDown(DownGraph):
        def _down(self) -> Any:
            raise ServiceUnavailable("redis", "gone")

    backup = DownBackup()
    with pytest.raises(ServiceUnavailable) as caught:
        Searcher(RedisDown(), FakeEmbedder(), settings(), backup).search(request())
    assert caught.value.service == "redis" and backup.timeouts == []
