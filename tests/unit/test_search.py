"""Search logic that needs no store: the fulltext query, the query cache and the ranking."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, cast

import numpy as np
import pytest

from shared.embedding.base import Embedder, Vectors, normalise
from shared.models import SearchResult, utc_now
from shared.search import QueryEmbeddingCache, Searcher, fulltext_query
from shared.settings import Settings
from shared.stores.neo4j import Neo4jStore


class CountingEmbedder:
    """A tiny deterministic Embedder that records every text it is asked to embed."""

    def __init__(self, dimension: int = 8) -> None:
        self._dimension = dimension
        self.queries: list[str] = []

    @property
    def model_name(self) -> str:
        return "counting-test-model"

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: Sequence[str]) -> Vectors:
        rows = [self._raw(text) for text in texts]
        return normalise(np.array(rows, dtype=np.float32).reshape(len(texts), self._dimension))

    def embed_query(self, text: str) -> Vectors:
        self.queries.append(text)
        return self.embed([text])[0]

    def _raw(self, text: str) -> list[float]:
        digest = hashlib.sha256(text.encode("utf-8")).digest()
        return [float(byte) + 1.0 for byte in digest[: self._dimension]]


# fulltext_query


def test_lucene_syntax_and_operators_do_not_survive() -> None:
    query = fulltext_query('title:foo AND (bar OR "baz")~2 \\')

    assert query == "title foo and bar or baz 2"


@pytest.mark.parametrize(
    "text",
    [
        "+cat -dog !bird",
        "a && b || c",
        "wild* card? [1 TO 5] {a TO b}",
        "boost^4 fuzzy~ path/to\\thing",
        "NOT secret",
    ],
)
def test_no_lucene_special_character_or_upper_case_operator_survives(text: str) -> None:
    query = fulltext_query(text)

    assert query is not None
    assert not set(query) & set('+-&|!(){}[]^"~*?:\\/')
    assert not {"AND", "OR", "NOT", "TO"} & set(query.split())


@pytest.mark.parametrize("text", ["", "   ", "?!...:-)", '"()"~^*', "\\\\ && || !"])
def test_query_without_words_gives_none(text: str) -> None:
    assert fulltext_query(text) is None


def test_words_keep_their_case_and_unicode() -> None:
    assert fulltext_query("Zoë met Émile in 東京, 2024!") == "Zoë met Émile in 東京 2024"


def test_only_the_first_64_words_are_kept() -> None:
    query = fulltext_query(" ".join(f"w{i}" for i in range(100)))

    assert query is not None
    assert query.split() == [f"w{i}" for i in range(64)]


# QueryEmbeddingCache


def test_counting_embedder_fills_the_protocol() -> None:
    assert isinstance(CountingEmbedder(), Embedder)


def test_repeated_query_is_embedded_once_and_gives_the_same_vector() -> None:
    embedder = CountingEmbedder()
    cache = QueryEmbeddingCache(embedder, size=4)

    first = cache.embed("what is a cat")
    second = cache.embed("what is a cat")

    assert embedder.queries == ["what is a cat"]
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(first, embedder.embed(["what is a cat"])[0])


def test_least_recently_used_query_is_evicted() -> None:
    # Given a cache of two that saw a, then b, then a again (so b is the least recent)
    embedder = CountingEmbedder()
    cache = QueryEmbeddingCache(embedder, size=2)
    for text in ["a", "b", "a"]:
        cache.embed(text)
    assert embedder.queries == ["a", "b"]

    # When a third query arrives
    cache.embed("c")

    # Then b was evicted, a and c are still cached
    cache.embed("a")
    cache.embed("c")
    assert embedder.queries == ["a", "b", "c"]
    cache.embed("b")
    assert embedder.queries == ["a", "b", "c", "b"]


def test_cache_of_size_zero_never_caches() -> None:
    embedder = CountingEmbedder()
    cache = QueryEmbeddingCache(embedder, size=0)

    for _ in range(3):
        cache.embed("same")

    assert embedder.queries == ["same", "same", "same"]


# Searcher._rank


def _settings(**values: Any) -> Settings:
    base: dict[str, Any] = {"search_fulltext_weight": 0.0}
    return Settings(_env_file=None, **{**base, **values})


def _searcher(**values: Any) -> Searcher:
    # The ranking reads no store: none is given.
    return Searcher(store=cast(Neo4jStore, None), embedder=CountingEmbedder(), settings=_settings(**values))


def _memory(memory_id: str, **values: Any) -> dict[str, Any]:
    return {
        "id": memory_id,
        "content": f"content of {memory_id}",
        "content_hash": f"hash-{memory_id}",
        "memory_type": "document",
        "importance": 0.5,
        "document_id": "doc-1",
        "chunk_index": 0,
        **values,
    }


def _vector_row(memory_id: str, similarity: float, **values: Any) -> dict[str, Any]:
    """As ``_vector_candidates`` hands rows on: the score already a cosine similarity."""
    return {"memory": _memory(memory_id, **values), "score": similarity}


def _text_row(memory_id: str, similarity: float, text_score: float, **values: Any) -> dict[str, Any]:
    """As the fulltext query returns rows: Neo4j's cosine, (1 + cos) / 2, and the Lucene score."""
    return {
        "memory": _memory(memory_id, **values),
        "score": (1.0 + similarity) / 2.0,
        "text_score": text_score,
    }


def _rank(
    searcher: Searcher,
    vector_rows: list[dict[str, Any]],
    text_rows: list[dict[str, Any]] | None = None,
    threshold: float | None = None,
    top_k: int = 10,
) -> list[SearchResult]:
    return searcher._rank(vector_rows, text_rows or [], threshold, top_k)


def _ids(results: list[SearchResult]) -> list[str]:
    return [result.id for result in results]


def test_results_are_ordered_by_similarity_without_nudges() -> None:
    results = _rank(_searcher(), [_vector_row("low", 0.2), _vector_row("high", 0.9), _vector_row("mid", 0.5)])

    assert _ids(results) == ["high", "mid", "low"]
    assert [r.similarity_score for r in results] == [0.9, 0.5, 0.2]
    assert [r.score for r in results] == [0.9, 0.5, 0.2]


def test_threshold_drops_memories_below_it_and_keeps_those_at_it() -> None:
    rows = [_vector_row("a", 0.9), _vector_row("b", 0.5), _vector_row("c", 0.49), _vector_row("d", -0.3)]

    results = _rank(_searcher(), rows, threshold=0.5)

    assert _ids(results) == ["a", "b"]


def test_threshold_applies_to_similarity_not_to_the_nudged_score() -> None:
    # Given a memory just under the threshold that a fulltext hit would lift above it
    searcher = _searcher(search_fulltext_weight=0.5)
    vector_rows = [_vector_row("near", 0.45), _vector_row("above", 0.6)]
    text_rows = [_text_row("near", 0.45, text_score=3.0)]

    # When ranked with a threshold of 0.5
    results = _rank(searcher, vector_rows, text_rows, threshold=0.5)

    # Then the nudge does not let it through
    assert _ids(results) == ["above"]


def test_duplicate_content_keeps_only_the_best_scoring_copy() -> None:
    rows = [
        _vector_row("copy-worse", 0.6, content_hash="same"),
        _vector_row("other", 0.7),
        _vector_row("copy-best", 0.8, content_hash="same"),
    ]

    results = _rank(_searcher(), rows)

    assert _ids(results) == ["copy-best", "other"]


def test_memories_without_content_hash_are_not_merged() -> None:
    rows = [_vector_row("a", 0.8, content_hash=None), _vector_row("b", 0.7, content_hash=None)]

    assert _ids(_rank(_searcher(), rows)) == ["a", "b"]


def test_fulltext_hit_is_nudged_by_its_share_of_the_best_hit() -> None:
    # Given vector hits a (0.70) and b (0.65), b also the best fulltext hit, c a half-as-good text-only hit
    searcher = _searcher(search_fulltext_weight=0.1)
    vector_rows = [_vector_row("a", 0.70), _vector_row("b", 0.65)]
    text_rows = [_text_row("b", 0.65, text_score=4.0), _text_row("c", 0.66, text_score=2.0)]

    # When ranked
    results = _rank(searcher, vector_rows, text_rows)

    # Then b gains the full weight, c half of it, and they pass a
    assert _ids(results) == ["b", "c", "a"]
    by_id = {r.id: r for r in results}
    assert by_id["b"].score == pytest.approx(0.75)
    assert by_id["c"].score == pytest.approx(0.71)
    assert by_id["c"].similarity_score == pytest.approx(0.66)
    assert by_id["a"].score == pytest.approx(0.70)


def test_fulltext_only_hit_gets_its_true_cosine_similarity() -> None:
    results = _rank(_searcher(), [], [_text_row("t", -0.2, text_score=1.0)])

    assert results[0].similarity_score == pytest.approx(-0.2)


def test_vector_similarity_wins_over_the_fulltext_rows_copy() -> None:
    # The same memory found by both indexes: its similarity is the vector row's.
    results = _rank(_searcher(), [_vector_row("m", 0.8)], [_text_row("m", 0.1, text_score=1.0)])

    assert results[0].similarity_score == pytest.approx(0.8)


def test_top_k_cuts_the_ranked_list() -> None:
    rows = [_vector_row(f"m{i}", i / 10) for i in range(10)]

    results = _rank(_searcher(), rows, top_k=3)

    assert _ids(results) == ["m9", "m8", "m7"]


def test_top_k_counts_results_after_dedup() -> None:
    rows = [
        _vector_row("x1", 0.9, content_hash="x"),
        _vector_row("x2", 0.8, content_hash="x"),
        _vector_row("y", 0.7),
        _vector_row("z", 0.6),
    ]

    assert _ids(_rank(_searcher(), rows, top_k=2)) == ["x1", "y"]


def test_memory_type_weight_lifts_its_type() -> None:
    searcher = _searcher(search_memory_type_weights={"fact": 0.2})
    rows = [_vector_row("doc", 0.6), _vector_row("fact", 0.5, memory_type="fact")]

    results = _rank(searcher, rows)

    assert _ids(results) == ["fact", "doc"]
    assert results[0].score == pytest.approx(0.7)
    assert results[0].similarity_score == pytest.approx(0.5)


def test_importance_above_half_lifts_and_below_half_lowers() -> None:
    searcher = _searcher(search_importance_weight=0.2)
    rows = [
        _vector_row("plain", 0.5),
        _vector_row("key", 0.5, importance=1.0),
        _vector_row("minor", 0.5, importance=0.25),
    ]

    results = _rank(searcher, rows)

    assert _ids(results) == ["key", "plain", "minor"]
    assert [r.score for r in results] == pytest.approx([0.6, 0.5, 0.45])


def test_importance_zero_lowers_the_score_most() -> None:
    # Given two equally similar memories, one of importance 0.0 and one of 0.25
    searcher = _searcher(search_importance_weight=0.2)
    rows = [_vector_row("unimportant", 0.5, importance=0.0), _vector_row("minor", 0.5, importance=0.25)]

    # When ranked with an importance weight
    results = _rank(searcher, rows)

    # Then importance 0.0 is penalised by 0.2 * (0.0 - 0.5), below importance 0.25
    assert _ids(results) == ["minor", "unimportant"]
    assert {r.id: r.score for r in results} == pytest.approx({"minor": 0.45, "unimportant": 0.4})


def test_recency_weight_prefers_the_newer_of_equally_similar_memories() -> None:
    now = utc_now()
    searcher = _searcher(search_recency_weight=0.1, search_recency_half_life_days=30.0)
    rows = [
        _vector_row("old", 0.5, created_at=now - timedelta(days=30)),
        _vector_row("new", 0.5, created_at=now),
        _vector_row("undated", 0.5),
    ]

    results = _rank(searcher, rows)

    assert _ids(results) == ["new", "old", "undated"]
    assert {r.id: r.score for r in results} == pytest.approx(
        {"new": 0.6, "old": 0.55, "undated": 0.5}, abs=1e-4
    )


def test_results_carry_the_memory_fields() -> None:
    created = utc_now()
    row = _vector_row(
        "m",
        0.4242424242,
        title="Title",
        session_id="s1",
        project_id="p1",
        tags=["x", "y"],
        chunk_index=3,
        created_at=created,
    )

    (result,) = _rank(_searcher(), [row])

    assert result.content == "content of m"
    assert result.similarity_score == 0.424242
    assert (result.document_id, result.chunk_index, result.title) == ("doc-1", 3, "Title")
    assert (result.session_id, result.project_id, result.tags) == ("s1", "p1", ["x", "y"])
    assert result.created_at == created


def test_no_candidates_give_no_results() -> None:
    assert _rank(_searcher(), [], []) == []
