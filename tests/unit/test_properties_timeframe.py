"""Properties of the query's time reader: whatever a tenant types, it names a window or no time,
never an error, and reads no more than a bounded slice of the query."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.search.timeframe import MAX_CHARS, MAX_TIME_WORDS, bounded, timeframe

NOW = datetime(2023, 10, 20, 15, 30, tzinfo=UTC)

# Words and numbers of dates, years at both ends of what a datetime holds among them.
_WORDS = "in on before after since until may december january monday last next year week ago "
_NUMBERS = "1 9 12 31 0001 1000 2023 9998 9999 10000 , / - : th"
DATE_WORDS = st.sampled_from((_WORDS + _NUMBERS).split())
DATEISH = st.lists(DATE_WORDS, max_size=8).map(" ".join)


@given(DATEISH | st.text(max_size=60))
@settings(max_examples=300, deadline=None)
def test_any_query_names_a_window_or_no_time(query: str) -> None:
    # Given any query, dates at the edges of the calendar among them
    # When its time is read
    found = timeframe(query, NOW)

    # Then it is no time, or a window whose start comes before its end
    if found is not None and found.start is not None and found.end is not None:
        assert found.start < found.end


@pytest.mark.parametrize(
    "query",
    ["in December 9999", "what happened in 9999", "what did I do on 31 December 9999", "in year 1"],
)
def test_a_date_no_window_holds_is_no_time(query: str) -> None:
    # Given a date whose window a datetime cannot hold (year 9999's end is year 10000)
    # Then the query names no time, rather than the search failing
    assert timeframe(query, NOW) is None


@pytest.mark.parametrize("query", ["1, " * 2700, "1 may " * 1400, "May 3 " * 1400])
def test_an_8kb_pathological_query_is_read_in_the_time_of_a_short_one(query: str) -> None:
    # Given 8 KB of words that each could start a date (seconds of dateparser, read whole)
    short = query[:40]
    started = time.perf_counter()
    timeframe(short, NOW)
    short_s = time.perf_counter() - started

    # When its time is read
    started = time.perf_counter()
    timeframe(query, NOW)
    long_s = time.perf_counter() - started

    # Then it costs what a bounded slice costs (its first MAX_CHARS characters), not seconds
    assert long_s < max(20 * short_s, 0.5), (long_s, short_s)


# Questions as the eval sets ask them (LoCoMo's longest has 22 words), a time early, late or none.
QUESTIONS = [
    "What did Caroline do in May 2023?",
    "Who did Maria have dinner with on May 3, 2023?",
    "What painting did Melanie show on 13 October, 2023?",
    "What did Caroline's sister's friend say at the lake house on 3 May 2023?",
    "Where did John and his two brothers go on a road trip the week before last year's holiday?",
    "How many times did Joanna go to the gym in the three weeks after she moved on 4 July 2023?",
    "What did we plan for the days after the 2 June meeting?",
    "When did Caroline go to the LGBTQ support group?",
    "what did she say two weeks ago about the trip",
]


@pytest.mark.parametrize("question", QUESTIONS)
def test_an_ordinary_question_is_read_whole(question: str) -> None:
    # Given a question as the eval sets ask it, Then the time reader reads all of it: the bound on
    # words that may name a time cuts only text dense in dates
    assert bounded(question) == question


@pytest.mark.parametrize(
    ("query", "read"),
    [
        ("1 may " * 1400, "1 may 1 may 1 may"),
        ("1, " * 2700, "1, 1, 1, 1, 1, 1,"),
        ("one two " * 1000, "one two one two one two"),
        # "we" may be Wednesday to dateparser: a word that may name a time, counted
        ("What did we say on " + "3 May 2023 " * 700, "What did we say on 3 May 2023 3 May"),
    ],
    ids=["1 may", "1,", "one two", "a question then dates"],
)
def test_words_dense_in_dates_are_read_up_to_their_sixth_that_may_name_a_time(query: str, read: str) -> None:
    # Given 8 KB whose every word may name a time (each date found costs dateparser milliseconds)
    # Then the reader reads up to the sixth of them: a few dates, what a question names
    assert MAX_TIME_WORDS == 6 and bounded(query) == read


def test_the_slice_read_ends_at_a_whole_word() -> None:
    query = "what did we say on 3 May 2023 " + "x" * 10 + " word" * 100

    cut = bounded(query)

    assert len(cut) <= MAX_CHARS and query.startswith(cut) and query[len(cut)] == " "
    assert bounded("short query") == "short query"


def test_a_read_past_its_budget_names_no_time() -> None:
    # Given a query that names a time, and no time to read it in
    # Then it names none: the budget holds even where dateparser is slow
    assert timeframe("What did Caroline do in May 2023?", NOW, budget_s=0.0) is None
    assert timeframe("What did Caroline do in May 2023?", NOW) is not None
