"""Pure parts of the search: BM25 with tenant statistics, fusion, ranking, shaping and budgets."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone

import pytest

from shared.models import SearchResult
from shared.search.bm25 import TermStats, bm25, bm25_ceiling
from shared.search.fusion import (
    blend,
    feedback_vector,
    keyword_only,
    merge,
    rrf,
    vector_only,
    with_keywords,
    with_ranks,
)
from shared.search.ranking import RankingPolicy, rank, recency
from shared.search.records import Candidate, Fused, Hit, Ranked
from shared.search.shaping import context, explain, result, within_budget

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def hit(memory_id: str, content: str = "", **values: object) -> Hit:
    fields: dict[str, object] = {
        "id": memory_id,
        "content": content or f"content of {memory_id}",
        "document_id": f"doc-{memory_id}",
        "chunk_index": 0,
        "content_hash": f"hash-{memory_id}",
        **values,
    }
    return Hit(**fields)  # type: ignore[arg-type]


def cand(
    memory_id: str,
    similarity: float,
    keyword: float | None = None,
    share: float | None = None,
    **values: object,
) -> Candidate:
    return Candidate(hit(memory_id, **values), similarity, keyword=keyword, keyword_share=share)


def ids(items: list[Ranked]) -> list[str]:
    return [r.hit.id for r in items]


# BM25


def test_bm25_is_lucenes_formula_with_the_tenants_statistics() -> None:
    # Given a tenant of 10 memories averaging 4 words, 2 of which hold "otter"
    stats = TermStats(documents=10, average_length=4.0, document_frequency={"otter": 2, "river": 5})

    # When a 4-word memory holding "otter" twice and "river" once is scored
    score = bm25(["otter", "river"], "otter otter river bank", stats)

    # Then it is the sum over words of idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))
    idf_otter = math.log(1 + (10 - 2 + 0.5) / (2 + 0.5))
    idf_river = math.log(1 + (10 - 5 + 0.5) / (5 + 0.5))
    expected = idf_otter * 2 * 2.2 / (2 + 1.2) + idf_river * 1 * 2.2 / (1 + 1.2)
    assert score == pytest.approx(expected)


def test_bm25_counts_a_repeated_query_word_twice_and_a_missing_word_not_at_all() -> None:
    stats = TermStats(10, 4.0, {"otter": 2})

    once = bm25(["otter"], "otter on rocks here", stats)

    assert bm25(["otter", "otter"], "otter on rocks here", stats) == pytest.approx(2 * once)
    assert bm25(["badger"], "otter on rocks here", stats) == 0.0


def test_bm25_matches_another_form_of_a_word() -> None:
    # Given the tenant's statistics counted by stem, as the English index counts them
    stats = TermStats(10, 4.0, {"hike": 2, "mountain": 1})

    # Then a query saying "hiking mountains" scores a memory saying "hiked" and "mountain"
    assert bm25(["hiking", "mountains"], "we hiked a mountain", stats) == pytest.approx(
        bm25(["hike", "mountain"], "we hike a mountain", stats)
    )
    assert bm25(["hiking"], "we hiked a mountain", stats) > 0


def test_a_longer_memory_scores_less_for_the_same_matches() -> None:
    stats = TermStats(10, 4.0, {"otter": 2})

    assert bm25(["otter"], "otter a b c", stats) > bm25(["otter"], "otter a b c d e f g h", stats)
    assert bm25(["otter"], "otter", stats, length=2) > bm25(["otter"], "otter", stats, length=8) > 0


def test_the_ceiling_bounds_every_score() -> None:
    stats = TermStats(10, 4.0, {"otter": 2, "river": 5})

    assert bm25(["otter", "river"], "otter otter otter river", stats) < bm25_ceiling(
        ["otter", "river"], stats
    )


def test_with_keywords_scores_every_candidate_whoever_found_it() -> None:
    stats = TermStats(3, 3.0, {"otter": 1})
    candidates = [cand("a", 0.9, content="otter in water"), cand("b", 0.8, content="no match here")]

    scored = with_keywords(candidates, ["otter"], stats)

    assert scored[0].keyword is not None and scored[0].keyword > 0
    assert scored[1].keyword == 0.0


# fusion


def test_merge_keeps_one_candidate_per_memory_and_what_each_source_knew() -> None:
    from_vector = [Candidate(hit("a"), 0.9, vector_rank=1)]
    from_text = [Candidate(hit("a"), 0.9, keyword_rank=3, keyword=2.0), Candidate(hit("b"), 0.1, keyword=1.0)]

    merged = merge([from_vector, from_text])

    assert [(c.hit.id, c.vector_rank, c.keyword_rank, c.keyword) for c in merged] == [
        ("a", 1, 3, 2.0),
        ("b", None, None, 1.0),
    ]


def test_ranks_by_similarity_for_all_and_by_keyword_for_those_holding_a_word() -> None:
    ranked = with_ranks([cand("a", 0.5, 0.0), cand("b", 0.9, 1.0), cand("c", 0.7, 3.0)])

    assert {c.hit.id: (c.vector_rank, c.keyword_rank) for c in ranked} == {
        "a": (3, None),
        "b": (1, 2),
        "c": (2, 1),
    }


def test_plain_rrf_is_the_sum_of_reciprocal_ranks() -> None:
    candidates = with_ranks([cand("a", 0.9, 1.0), cand("b", 0.5, 3.0), cand("c", 0.7, 0.0)])

    fused = {f.candidate.hit.id: f.fused for f in rrf(candidates, k=60, keyword_weight=0.5)}

    assert fused["a"] == pytest.approx(0.5 / 61 + 0.5 / 62)
    assert fused["b"] == pytest.approx(0.5 / 63 + 0.5 / 61)
    assert fused["c"] == pytest.approx(0.5 / 62)


def test_weighted_rrf_leans_to_the_weighted_side() -> None:
    candidates = with_ranks([cand("sem", 0.9, 1.0), cand("key", 0.5, 5.0)])

    keyword_heavy = {f.candidate.hit.id: f.fused for f in rrf(candidates, keyword_weight=0.9)}
    semantic_heavy = {f.candidate.hit.id: f.fused for f in rrf(candidates, keyword_weight=0.1)}

    assert keyword_heavy["key"] > keyword_heavy["sem"]
    assert semantic_heavy["sem"] > semantic_heavy["key"]


def test_blend_takes_the_cosine_as_it_is_and_the_keyword_share_of_the_ceiling() -> None:
    candidates = [cand("a", 0.8, 4.0, 0.5), cand("b", 0.6, 0.0, 0.0), cand("c", 0.4, 2.0, 0.25)]

    fused = {f.candidate.hit.id: f.fused for f in blend(candidates, keyword_ratio=0.25)}

    assert fused == pytest.approx(
        {"a": 0.75 * 0.8 + 0.25 * 0.5, "b": 0.75 * 0.6, "c": 0.75 * 0.4 + 0.25 * 0.25}
    )


def test_a_memorys_blend_does_not_depend_on_the_other_candidates() -> None:
    few = [cand("a", 0.8, 4.0, 0.5), cand("b", 0.6, 1.0, 0.1)]
    many = [*few, *(cand(f"x{i}", 0.1 * (i % 5), 9.0, 0.9) for i in range(50))]

    def score(items: list[Candidate]) -> dict[str, float]:
        return {f.candidate.hit.id: f.fused for f in blend(items, 0.3)}

    assert {k: score(many)[k] for k in ("a", "b")} == pytest.approx(score(few))


def test_with_keywords_gives_the_share_of_the_most_the_words_can_give() -> None:
    stats = TermStats(10, 4.0, {"otter": 2})
    (scored,) = with_keywords([cand("a", 0.5, content="otter otter otter")], ["otter"], stats)

    assert scored.keyword_share == pytest.approx(scored.keyword / bm25_ceiling(["otter"], stats))
    assert 0 < scored.keyword_share < 1


def test_blend_ratio_zero_orders_by_similarity_and_one_by_keyword() -> None:
    candidates = [cand("a", 0.8, 1.0, 0.1), cand("b", 0.6, 3.0, 0.3), cand("c", 0.7, 2.0, 0.2)]

    def order(ratio: float) -> list[str]:
        fused = blend(candidates, ratio)
        return [f.candidate.hit.id for f in sorted(fused, key=lambda f: -f.fused)]

    assert order(0.0) == ["a", "c", "b"]
    assert order(1.0) == ["b", "c", "a"]


def test_keyword_match_lifts_a_memory_and_semantic_fills_the_gaps() -> None:
    # Seed 001: a memory holding the query's rare words passes a slightly closer one that does
    # not; memories with no keyword evidence are still found by similarity.
    candidates = [
        cand("close", 0.62, 0.0, 0.0),
        cand("named", 0.58, 6.0, 0.6),
        cand("related", 0.55, 0.0, 0.0),
        cand("far", 0.2, 1.0, 0.1),
    ]

    order = [f.candidate.hit.id for f in sorted(blend(candidates, 0.3), key=lambda f: -f.fused)]

    assert order == ["named", "close", "related", "far"]


def test_one_signal_methods() -> None:
    candidates = [cand("a", 0.8, 0.0), cand("b", 0.6, 3.0)]

    assert [f.fused for f in vector_only(candidates)] == [0.8, 0.6]
    assert [(f.candidate.hit.id, f.fused) for f in keyword_only(candidates)] == [("b", 3.0)]


def test_blend_of_nothing_is_nothing() -> None:
    assert blend([], 0.3) == []


# ranking


def fused(*items: tuple[str, float, float], **values: object) -> list[Fused]:
    return [Fused(cand(name, sim, **values), score) for name, sim, score in items]


def test_threshold_is_on_similarity_not_on_the_fused_score() -> None:
    items = fused(("near", 0.45, 0.99), ("above", 0.6, 0.1))

    assert ids(rank(items, RankingPolicy(threshold=0.5), 10, NOW)) == ["above"]


def test_a_memory_type_threshold_replaces_the_global_one_for_that_type() -> None:
    items = [
        Fused(cand("note", 0.35, memory_type="note"), 0.5),
        Fused(cand("fact", 0.35, memory_type="fact"), 0.4),
        Fused(cand("doc", 0.6), 0.3),
    ]
    policy = RankingPolicy(threshold=0.5, type_thresholds={"note": 0.3, "document": 0.7})

    assert ids(rank(items, policy, 10, NOW)) == ["note"]


def test_duplicate_content_keeps_only_the_best_copy_and_top_k_counts_after_dedup() -> None:
    items = [
        Fused(cand("x1", 0.9, content_hash="x"), 0.9),
        Fused(cand("x2", 0.8, content_hash="x"), 0.8),
        Fused(cand("y", 0.7), 0.7),
        Fused(cand("z", 0.6), 0.6),
    ]

    assert ids(rank(items, RankingPolicy(), 2, NOW)) == ["x1", "y"]


def test_one_per_document_keeps_each_documents_best_chunk() -> None:
    items = [
        Fused(cand("d1-a", 0.5, document_id="d1"), 0.5),
        Fused(cand("d1-b", 0.9, document_id="d1"), 0.9),
        Fused(cand("d2", 0.7, document_id="d2"), 0.7),
    ]

    assert ids(rank(items, RankingPolicy(one_per_document=True), 10, NOW)) == ["d1-b", "d2"]
    assert ids(rank(items, RankingPolicy(), 10, NOW)) == ["d1-b", "d2", "d1-a"]


def test_additive_nudges_importance_type_and_recency() -> None:
    items = [
        Fused(cand("plain", 0.5, created_at=NOW - timedelta(days=30)), 0.5),
        Fused(cand("key", 0.5, importance=1.0, created_at=NOW - timedelta(days=30)), 0.5),
        Fused(cand("fact", 0.5, memory_type="fact", created_at=NOW), 0.5),
    ]
    policy = RankingPolicy(
        importance_weight=0.2, recency_weight=0.1, recency_half_life_days=30, type_weights={"fact": 0.05}
    )

    ranked = rank(items, policy, 10, NOW)

    assert {r.hit.id: round(r.score, 6) for r in ranked} == {
        "plain": 0.55,
        "key": 0.65,
        "fact": 0.65,
    }
    by_id = {r.hit.id: r for r in ranked}
    assert by_id["key"].nudges == {"importance": pytest.approx(0.1), "recency": pytest.approx(0.05)}
    assert by_id["fact"].nudges == {"importance": 0.0, "recency": pytest.approx(0.1), "memory_type": 0.05}
    assert ids(ranked) == ["fact", "key", "plain"]


def test_seed004_preset_is_50_30_15_5() -> None:
    items = [
        Fused(cand("best", 0.8, importance=0.2, memory_type="implicit", created_at=NOW), 1.0),
        Fused(cand("core", 0.6, importance=1.0, memory_type="core"), 0.5),
    ]
    policy = RankingPolicy(preset="seed004", type_weights={"core": 1.3, "implicit": 1.0})

    ranked = {r.hit.id: r for r in rank(items, policy, 10, NOW)}

    assert ranked["best"].score == pytest.approx(0.5 * 1.0 + 0.3 * 0.2 + 0.15 * 1.0 / 1.3 + 0.05 * 1.0)
    assert ranked["core"].score == pytest.approx(0.5 * 0.5 + 0.3 * 1.0 + 0.15 * 1.0 + 0.0)


def test_recency_halves_every_half_life_and_is_zero_undated() -> None:
    assert recency(NOW, NOW, 30) == 1.0
    assert recency(NOW - timedelta(days=60), NOW, 30) == pytest.approx(0.25)
    assert recency(None, NOW, 30) == 0.0


def test_ties_are_broken_by_similarity_then_id() -> None:
    items = [Fused(cand("b", 0.5), 1.0), Fused(cand("a", 0.5), 1.0), Fused(cand("c", 0.6), 1.0)]

    assert ids(rank(items, RankingPolicy(), 10, NOW)) == ["c", "a", "b"]


# shaping


def ranked_item(memory_id: str, score: float, tokens: int | None = None, **values: object) -> Ranked:
    candidate = Candidate(
        hit(memory_id, token_count=tokens, **values), 0.7, vector_rank=2, keyword_rank=1, keyword=3.5
    )
    return Ranked(candidate, fused=0.8, score=score, nudges={"importance": 0.05})


def test_each_result_explains_its_score() -> None:
    explanation = explain(ranked_item("m", 0.85), "engram")

    assert explanation.model_dump() == {
        "method": "engram",
        "similarity": 0.7,
        "keyword": 3.5,
        "keyword_share": None,
        "feedback_similarity": None,
        "vector_rank": 2,
        "keyword_rank": 1,
        "fused": 0.8,
        "nudges": {"importance": 0.05},
        "rerank": None,
        "score": 0.85,
    }


def shaped(*items: Ranked) -> list[SearchResult]:
    return [result(item, "engram") for item in items]


def test_token_budget_stops_at_the_first_result_that_would_overrun_it() -> None:
    found = shaped(ranked_item("a", 0.9, 40), ranked_item("b", 0.8, 50), ranked_item("c", 0.7, 5))

    assert [r.id for r in within_budget(found, 90)] == ["a", "b"]
    assert [r.id for r in within_budget(found, 89)] == ["a"]
    assert within_budget(found, 10) == []


def test_a_result_without_a_token_count_is_estimated_at_four_characters_a_token() -> None:
    found = shaped(ranked_item("a", 0.9, None, content="x" * 40))

    assert [r.id for r in within_budget(found, 10)] == ["a"]
    assert within_budget(found, 9) == []


def test_context_numbers_the_results_and_counts_their_tokens() -> None:
    found = shaped(ranked_item("a", 0.9, 3, content="first memory", title="Notes"), ranked_item("b", 0.8, 4))

    text, tokens = context(found)

    assert text == "[1] Notes (score 0.900)\nfirst memory\n\n[2] doc-b (score 0.800)\ncontent of b"
    assert tokens == 7


def test_context_says_where_and_when_each_memory_was_said() -> None:
    # Given a conversation turn of a session, said at 18:30 in New York
    said_at = datetime(2023, 5, 8, 18, 30, tzinfo=timezone(timedelta(hours=-4)))
    turn = ranked_item(
        "t",
        0.9,
        5,
        content="Caroline: I went to the support group yesterday.",
        session_id="s7",
        created_at=said_at,
    )

    text, _ = context(shaped(turn))

    # Then its header names the session and the moment (UTC), so "when did ...?" can be answered
    assert text.splitlines()[0] == "[1] doc-t · session s7 · 2023-05-08 22:30 UTC (score 0.900)"


def test_feedback_moves_the_query_toward_the_mean_of_the_best_and_keeps_unit_length() -> None:
    moved = feedback_vector([2.0, 0.0], [[0.0, 3.0], [0.0, 1.0]], weight=1.0)

    assert moved == pytest.approx([1 / math.sqrt(2), 1 / math.sqrt(2)])
    assert feedback_vector([2.0, 0.0], [], weight=1.0) == [1.0, 0.0]


def test_blend_reads_the_feedback_similarity_when_there_is_one() -> None:
    candidates = [
        Candidate(hit("a"), 0.9, keyword=0.0, keyword_share=0.0, feedback=0.1),
        Candidate(hit("b"), 0.1, keyword=0.0, keyword_share=0.0, feedback=0.9),
    ]

    fused = {f.candidate.hit.id: f.fused for f in blend(candidates, 0.0)}

    assert fused == pytest.approx({"a": 0.1, "b": 0.9})
