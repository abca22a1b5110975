"""The Searcher over an in-memory store: filters that never starve on either side, one tenant's
data never moving another's scores, neighbours, budgets and the baseline methods."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

import pytest

from shared.models import SearchRequest, SearchResponse
from shared.search import Searcher
from shared.settings import Settings
from tests.unit.fakes import FakeEmbedder
from tests.unit.search_fakes import FakeSearchStore, Stored, small_tenant, stored


def settings(**values: Any) -> Settings:
    return Settings(_env_file=None, **values)


def search(store: FakeSearchStore, s: Settings | None = None, **body: Any) -> SearchResponse:
    request = SearchRequest.model_validate({"query": "otter river", "user_id": "small", **body})
    return Searcher(store, FakeEmbedder(), s or settings()).search(request)


def scores(response: SearchResponse) -> list[tuple[str, float, float | None]]:
    assert all(r.explanation is not None for r in response.results)
    return [(r.id, r.score, r.explanation.keyword if r.explanation else None) for r in response.results]


def big_tenant(n: int, text: str = "otter river otter river") -> list[Stored]:
    return [stored(f"b{i}", "big", f"{text} {i}") for i in range(n)]


def test_a_tenant_of_one_percent_gets_top_k_from_both_sides() -> None:
    # Given a store where another tenant holds 99% of the memories, all matching the query
    store = FakeSearchStore([*small_tenant(), *big_tenant(495)])

    # When the small tenant searches
    answer = search(store, top_k=5)

    # Then it gets all five of its memories, and its keyword matches carry keyword scores
    assert sorted(r.id for r in answer.results) == ["s0", "s1", "s2", "s3", "s4"]
    keyword = {r.id: r.explanation.keyword for r in answer.results if r.explanation}
    assert all(keyword[m] for m in ["s0", "s1", "s2", "s4"]) and keyword["s3"] == 0.0


def test_another_tenants_data_changes_nothing_in_a_tenants_scores() -> None:
    store = FakeSearchStore(small_tenant())
    for method in ("engram", "bm25", "vector", "rrf", "weighted_rrf"):
        before = scores(search(store, settings(search_stats_ttl_s=0), method=method))

        store.add(*big_tenant(300, text=f"otter river {method}"))
        after = scores(search(store, settings(search_stats_ttl_s=0), method=method))

        assert after == before, method


def test_a_small_filtered_set_is_scanned_exactly_and_never_through_the_index() -> None:
    store = FakeSearchStore([*small_tenant(), *big_tenant(100)])

    search(store, settings(search_exact_scan_limit=10), method="vector", top_k=2)

    assert [kind for kind, _ in store.asked] == ["count", "exact"]


def test_a_large_filtered_set_oversamples_the_index_until_the_pool_is_met() -> None:
    # Given a tenant of 200 in a store of 2,200: too many to scan, sparse in the index
    store = FakeSearchStore([*big_tenant(2000), *[stored(f"m{i}", "mid", f"memory {i}") for i in range(200)]])

    answer = search(store, settings(search_exact_scan_limit=50), method="vector", user_id="mid", top_k=10)

    # Then the index is asked for 4x more each time until 40 candidates pass the filter
    vector_calls = [k for kind, k in store.asked if kind == "vector"]
    assert vector_calls[0] == 40 and all(b == 4 * a for a, b in itertools.pairwise(vector_calls))
    assert answer.count == 10 and all(r.id.startswith("m") for r in answer.results)
    assert "exact" not in [kind for kind, _ in store.asked]


def test_where_the_index_holds_the_tenant_a_tenant_only_search_asks_it_once_at_the_pool() -> None:
    # Given a store whose vector index holds the tenant (Neo4j 2026.02+), a small tenant beside a
    # large one
    store = FakeSearchStore([*small_tenant(), *big_tenant(400)])
    store.tenant_inside = True

    # When the small tenant searches with no filter but itself
    answer = search(store, settings(search_exact_scan_limit=2000), method="vector", top_k=3)

    # Then the index is asked once at the pool's k (3 x 4): no count, no scan, the tenant's own
    assert store.asked == [("vector", 12)]
    assert {r.id for r in answer.results} <= {f"s{i}" for i in range(5)} and answer.count == 3

    # And with another filter as well, the filtered set is counted (and, small, scanned) as before
    store.asked.clear()
    search(store, settings(search_exact_scan_limit=2000), method="vector", top_k=3, filters={"tags": ["x"]})
    assert [kind for kind, _ in store.asked] == ["count", "exact"]


def test_the_index_is_asked_at_least_its_least_k_and_the_pool_is_its_best() -> None:
    # Given a tenant too large to scan exactly
    store = FakeSearchStore(big_tenant(400))

    # When a search's pool (top_k 3 x oversample 4 = 12) is under the index's least k
    answer = search(
        store,
        settings(search_exact_scan_limit=50, search_vector_min_k=100),
        method="vector",
        user_id="big",
        top_k=3,
    )

    # Then the index is asked for 100 (HNSW's beam is k wide: wider finds more of the true nearest),
    # and the results are the exact best three, as a scan ranks them
    assert [k for kind, k in store.asked if kind == "vector"] == [100]
    scanned = search(store, settings(search_exact_scan_limit=1000), method="vector", user_id="big", top_k=3)
    assert [r.id for r in answer.results] == [r.id for r in scanned.results]


def test_the_fulltext_limit_grows_when_filters_leave_it_short() -> None:
    # Given 300 matching memories of one tenant, only 3 of them in session "rare"
    memories = [
        stored(f"t{i}", "t", f"otter river {i}", session_id="rare" if i % 100 == 0 else "common")
        for i in range(300)
    ]
    store = FakeSearchStore(memories)

    answer = search(
        store,
        settings(search_exact_scan_limit=0),
        method="bm25",
        user_id="t",
        top_k=3,
        filters={"session_id": "rare"},
    )

    assert sorted(r.id for r in answer.results) == ["t0", "t100", "t200"]
    assert [k for kind, k in store.asked if kind == "fulltext"] == [12, 48, 192, 768]


def test_methods_read_only_the_sources_they_need() -> None:
    store = FakeSearchStore(small_tenant())

    search(store, method="bm25")
    assert "vector" not in {kind for kind, _ in store.asked} and "exact" not in {k for k, _ in store.asked}
    store.asked.clear()
    search(store, method="vector")
    assert "fulltext" not in {kind for kind, _ in store.asked}


def test_bm25_returns_only_memories_holding_a_query_word_best_first() -> None:
    answer = search(FakeSearchStore(small_tenant()), method="bm25")

    assert "s3" not in [r.id for r in answer.results]
    assert [r.score for r in answer.results] == sorted((r.score for r in answer.results), reverse=True)


def test_neighbours_come_along_next_in_document_order() -> None:
    chunks = ["alpha part", "otter part", "omega part"]
    store = FakeSearchStore(
        [stored(f"c{i}", "small", text, document_id="d", chunk_index=i) for i, text in enumerate(chunks)]
    )

    answer = search(store, method="bm25", query="otter", neighbours=1)

    (found,) = answer.results
    assert (found.before, found.content, found.after) == (["alpha part"], "otter part", ["omega part"])


def test_a_token_budget_cuts_the_results_and_gives_the_context_text() -> None:
    answer = search(FakeSearchStore(small_tenant()), top_k=5, token_budget=9)

    assert answer.context is not None and answer.context.startswith("[1] ")
    assert answer.context_tokens is not None and answer.context_tokens <= 9
    assert 1 <= answer.count < 5


@pytest.mark.parametrize("preset", ["additive", "seed004"])
def test_either_ranking_preset_explains_its_nudges(preset: str) -> None:
    answer = search(
        FakeSearchStore(small_tenant()), settings(search_ranking_preset=preset, search_importance_weight=0.1)
    )

    explanation = answer.results[0].explanation
    assert explanation is not None and "importance" in explanation.nudges


def test_engram_feeds_the_first_rounds_best_back_for_common_words_and_blend_does_not() -> None:
    store = FakeSearchStore(small_tenant())

    engram = search(store, top_k=3)  # "otter river": words most of the tenant's memories hold
    rare = search(store, query="otter zebra", top_k=3)  # a word none holds: keyword weight 0.3
    assert all(r.explanation and r.explanation.feedback_similarity is None for r in rare.results)
    blend = search(store, top_k=3, method="blend")

    assert all(r.explanation and r.explanation.feedback_similarity is not None for r in engram.results)
    assert all(r.explanation and r.explanation.feedback_similarity is None for r in blend.results)
    # the similarity shown is still the true cosine with the query
    by_id = {r.id: r.similarity_score for r in blend.results}
    assert all(by_id[r.id] == r.similarity_score for r in engram.results if r.id in by_id)


def test_status_is_a_filter_on_both_sides() -> None:
    memories = small_tenant()
    memories[0].status = "archived"
    store = FakeSearchStore(memories)

    for method in ("vector", "bm25", "engram"):
        archived = search(store, method=method, top_k=5, filters={"statuses": ["archived"]})
        active = search(store, method=method, top_k=5, filters={"statuses": ["active"]})
        assert [r.id for r in archived.results] == ["s0"], method
        assert "s0" not in [r.id for r in active.results], method


def dated_tenant() -> list[Stored]:
    said = [
        ("d0", "the otter swam in the river", datetime(2022, 7, 2, tzinfo=UTC)),
        ("d1", "an otter slept by the river", datetime(2023, 5, 10, tzinfo=UTC)),
        ("d2", "river otter pups were born", datetime(2023, 9, 1, tzinfo=UTC)),
    ]
    return [stored(i, "small", text, created_at=at) for i, text, at in said]


def nudged(response: SearchResponse) -> dict[str, float]:
    return {r.id: r.explanation.nudges.get("time", 0.0) for r in response.results if r.explanation}


def test_a_time_the_query_names_nudges_the_memories_made_then() -> None:
    store = FakeSearchStore(dated_tenant())

    answer = search(store, query="otter in May 2023", top_k=3)

    assert nudged(answer) == {"d0": 0.0, "d1": 0.2, "d2": 0.0}
    (d1,) = [r.explanation for r in answer.results if r.id == "d1"]
    assert d1 is not None and d1.score == pytest.approx(d1.fused + 0.2)


def test_a_relative_time_is_read_from_the_tenants_newest_memory_or_the_now_given() -> None:
    store = FakeSearchStore(dated_tenant())

    # newest memory: September 2023, so "last year" is 2022
    assert nudged(search(store, query="otter river last year", top_k=3))["d0"] == 0.2
    # a now given with the search: in 2024, "last year" is 2023
    given = search(store, query="otter river last year", top_k=3, now="2024-02-01T00:00:00Z")
    assert nudged(given) == {"d0": 0.0, "d1": 0.2, "d2": 0.2}


def test_the_baselines_and_a_zero_weight_leave_time_alone() -> None:
    store = FakeSearchStore(dated_tenant())

    for method in ("vector", "bm25", "rrf", "blend"):
        assert set(nudged(search(store, query="otter in May 2023", top_k=3, method=method)).values()) == {0.0}
    off = search(store, settings(search_time_weight=0.0), query="otter in May 2023", top_k=3)
    assert set(nudged(off).values()) == {0.0}
