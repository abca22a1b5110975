"""A search's cost is bounded whatever the query's length (issue 25): every stage reads the query's
first ``ENGRAM_SEARCH_QUERY_MAX_WORDS`` words, so an 8 KB query asks the model, the indexes and
the keyword statistics for no more than a long ordinary question does; a query within the bound is
read whole, as before."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from shared.models import SearchRequest
from shared.search import Searcher
from shared.search.text import query_head, tokens
from shared.search.timeframe import MAX_WORDS, bounded, read_again, timeframe
from shared.settings import Settings
from tests.unit.fakes import FakeEmbedder
from tests.unit.search_fakes import FakeSearchStore, Stored

FLOODS = {
    "dates": ("1 may " * 1400)[:8180],
    "commas": ("1, " * 2731)[:8180],
    "distinct words": " ".join(f"w{i}" for i in range(2000))[:8180],
    "one long word": "a" * 8180,
    "ideographs": "\u4e00\u4e8c" * 4090,
}
# The longest question of the eval sets (LoCoMo dev, BEIR's) has 22 words: well within 64.
ORDINARY = (
    "When did Caroline go to the LGBTQ support group and what did she say about it to Melanie afterwards?"
)


class CountingStore(FakeSearchStore):
    """Records every Lucene query and keyword statistic asked for."""

    def __init__(self) -> None:
        rng = np.random.default_rng(3)
        super().__init__(
            [Stored(f"m{i}", "t", f"on 1 may w{i} said {i}", rng.normal(size=3)) for i in range(30)]
        )
        self.lucene: list[str] = []
        self.term_queries = 0

    def fulltext_candidates(
        self, text: str, vector: Any, k: int, filters: dict[str, Any]
    ) -> tuple[int, list[dict[str, Any]]]:
        self.lucene.append(text)
        return super().fulltext_candidates(text, vector, k, filters)

    def term_frequencies(self, user_id: str, queries: Mapping[str, str], cap: int) -> dict[str, int]:
        self.term_queries += len(queries)
        return super().term_frequencies(user_id, queries, cap)


def _search(query: str, **settings: Any) -> tuple[CountingStore, FakeEmbedder]:
    store, embedder = CountingStore(), FakeEmbedder()
    s = Settings(_env_file=None, search_feedback_weight=0.0, **settings)
    Searcher(store, embedder, s).search(SearchRequest.model_validate({"query": query, "user_id": "t"}))
    return store, embedder


@pytest.mark.parametrize("name", list(FLOODS))
def test_an_8kb_query_asks_no_more_than_its_first_words_would(name: str) -> None:
    # Given an 8 KB query of the kinds a flood sends
    flood = FLOODS[name]

    # When it is searched
    store, embedder = _search(flood)

    # Then the model read at most 64 words (1,024 characters), as it would for a long question
    (embedded,) = embedder.calls
    assert len(tokens(embedded[0])) <= 64 and len(embedded[0]) <= 1024
    assert flood.startswith(embedded[0])
    # And the fulltext index and the keyword statistics were asked for at most 64 terms
    assert store.lucene and all(lucene.count('"') <= 2 * (64 + 1) for lucene in store.lucene)
    assert store.term_queries <= 64


def test_the_bound_is_a_setting() -> None:
    store, embedder = _search(FLOODS["distinct words"], search_query_max_words=16)
    assert len(tokens(embedder.calls[0][0])) == 16
    assert store.term_queries == 16


def test_an_ordinary_question_is_read_whole() -> None:
    # Given a question as long as the eval sets' longest
    store, embedder = _search(ORDINARY)

    # Then the model and the indexes read it as it was said
    assert embedder.calls == [[ORDINARY]]
    assert all(f'"{word}"' in store.lucene[0] for word in ("caroline", "lgbtq", "melanie", "afterwards"))


def test_query_head_keeps_the_text_up_to_the_last_word_kept() -> None:
    assert query_head("Hi, there: how are you?", 3) == "Hi, there: how"
    assert query_head("Hi, there: how are you?", 5) == "Hi, there: how are you?"
    assert query_head("  ", 3) == "  "
    assert query_head("\u4e00\u4e8c\u4e09", 2) == "\u4e00\u4e8c"
    assert query_head("a" * 5000, 64) == "a" * 1024


# The time a query names


@pytest.mark.parametrize(
    "question",
    [
        "Where did Ana go hiking last year?",
        "What did we say before 3 May 2023?",
        "what happened since April 10, 2023",
        "When did we plan the trip two weeks ago with Melanie?",
        "what did we say yesterday",
    ],
)
def test_a_time_read_again_from_its_words_is_the_time_the_whole_question_names(question: str) -> None:
    # Given the time a question names, read relative to today
    first, newest = datetime(2024, 3, 1, tzinfo=UTC), datetime(2023, 9, 2, 9, 15, tzinfo=UTC)
    named = timeframe(question, first)
    assert named is not None

    # When it is read again relative to the tenant's newest memory, from its own words only
    # Then it is the time the whole question names relative to that moment
    assert read_again(named, question, newest) == timeframe(question, newest)


def test_the_time_is_read_from_the_first_32_words() -> None:
    flood = ("plan " * 1600)[:8180]  # words dense in dates: test_properties_timeframe.py
    assert len(tokens(bounded(flood))) == MAX_WORDS == 32
    assert bounded(ORDINARY) == ORDINARY
