"""Time named in a query, read by dateparser, as a window on created_at; adaptive fusion's weight."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from shared.search import fusion
from shared.search.bm25 import TermStats
from shared.search.records import Candidate, Hit
from shared.search.text import query_terms
from shared.search.timeframe import Timeframe, _read, _vocabulary, may_name_time, timeframe

NOW = datetime(2023, 10, 20, 15, 30, tzinfo=UTC)


def day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=UTC)


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("What did Caroline do in May 2023?", day(2023, 5, 1), day(2023, 6, 1)),
        ("Who did Maria have dinner with on May 3, 2023?", day(2023, 5, 3), day(2023, 5, 4)),
        ("What painting did Melanie show on 13 October, 2023?", day(2023, 10, 13), day(2023, 10, 14)),
        ("Where did John go on a road trip last year?", day(2022, 1, 1), day(2023, 1, 1)),
        ("What did Joanna write yesterday?", day(2023, 10, 19), day(2023, 10, 20)),
        ("Did Melanie paint a sunrise in 2022?", day(2022, 1, 1), day(2023, 1, 1)),
        ("What did Mel do before June?", None, day(2023, 6, 1)),
        ("What has he cooked since March 2023?", day(2023, 3, 1), None),
        ("What did she plan after 4 July 2023?", day(2023, 7, 5), None),
    ],
)
def test_a_named_time_is_the_whole_day_month_or_year_it_names(
    query: str, start: datetime | None, end: datetime | None
) -> None:
    found = timeframe(query, NOW)

    assert found is not None and (found.start, found.end) == (start, end), found


def test_relative_times_are_read_from_the_now_given() -> None:
    earlier = timeframe("what happened last year", datetime(2020, 3, 1, tzinfo=UTC))

    assert earlier is not None and (earlier.start, earlier.end) == (day(2019, 1, 1), day(2020, 1, 1))


@pytest.mark.parametrize(
    "query",
    [
        "When did Caroline go to the LGBTQ support group?",
        "How long ago was Caroline's 18th birthday?",
        "what are the 10 best otter facts",
        "",
    ],
)
def test_no_time_is_read_where_none_is_named(query: str) -> None:
    assert timeframe(query, NOW) is None


@pytest.mark.parametrize(
    "query",
    [
        "John Turturro 1991 Coen Brothers film",  # a digit
        "What did she paint last Sunday?",  # a naming word
        "meet the TH Scheme library on th",  # "th": Thursday, though a skip word
        "is it a and a thing",  # two joining words: 1 January to dateparser
        "x / a",  # a number word with punctuation
        "what did she do yestérday",  # as dateparser reads it: accents dropped
    ],
)
def test_the_gate_lets_through_every_query_dateparser_reads_a_time_in(query: str) -> None:
    assert may_name_time(query) and _read(query, NOW) is not None


@pytest.mark.parametrize(
    "query",
    [
        "what is an aml surveillance analyst",
        "exons definition biology",
        "When did Caroline go to the LGBTQ support group?",
        "the quiet lake by the river",
    ],
)
def test_the_gate_spares_dateparser_a_query_with_no_time_words(query: str) -> None:
    assert not may_name_time(query) and _read(query, NOW) is None


@pytest.mark.parametrize(
    "query",
    [
        "what did we do",  # "we": Wednesday to dateparser
        "what did we plan 3",
        "what may we do",  # "may we": May
        "mar the table",
        "fr the team",
        "TH Scheme Utilities library",
    ],
)
def test_a_short_form_of_a_weekday_or_month_alone_names_no_time(query: str) -> None:
    # Given a word of a sentence that dateparser also reads as a weekday or a month, with no date
    # beside it, Then the query names no time
    assert _read(query, NOW) is None


@pytest.mark.parametrize(
    ("query", "start"),
    [
        ("what did we do on 3 May 2023", day(2023, 5, 3)),  # not Wednesday: "we" passed over
        ("what did I do on wed", day(2023, 10, 18)),
        ("what happened on Sat", day(2023, 10, 14)),
        ("what did we do in may", day(2023, 5, 1)),
        ("on 3 mar", day(2023, 3, 3)),
    ],
)
def test_a_short_form_in_a_dates_context_still_names_its_time(query: str, start: datetime) -> None:
    found = _read(query, NOW)

    assert found is not None and found.start == start, found


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("What did we say before 3 May 2023?", "3 May 2023"),  # found as "we", "May", "2023"
        ("what happened before 3rd May, 2023", "3rd May, 2023"),
        ("until May 3 2023 what did we plan", "May 3 2023"),
    ],
)
def test_a_date_found_in_pieces_is_read_as_one_phrase_with_its_numbers(query: str, said: str) -> None:
    # Given a date dateparser finds in pieces, a number beside them left out
    found = _read(query, NOW)
    # Then it is read whole, and the "before" or "until" in front of it opens the window there
    assert found is not None and found.said == said, found
    assert found.start is None and found.end == day(2023, 5, 3), found


def test_one_joining_word_among_others_names_no_time() -> None:
    # Given each word of dateparser's that only joins or counts, alone among words it skips or
    # does not know (a number word with no punctuation beside it)
    joining = sorted(_vocabulary().joining)
    queries = [f"{around} {word} x" for word in joining for around in ("x", "the", "of the", "by")]

    # Then the gate says no time, and dateparser finds none
    assert not any(may_name_time(q) for q in queries)
    assert [q for q in queries if _read(q, NOW) is not None] == []


def test_a_window_holds_its_moments_and_slack_after_its_end() -> None:
    may = Timeframe("in May", day(2023, 5, 1), day(2023, 6, 1))

    assert may.holds(day(2023, 5, 31)) and not may.holds(day(2023, 6, 1))
    assert may.holds(day(2023, 6, 2), slack=timedelta(days=3)) and not may.holds(day(2023, 4, 30))
    assert not may.holds(None)
    assert Timeframe("before June", None, day(2023, 6, 1)).holds(day(1999, 1, 1))


def stats(documents: int, frequencies: dict[str, int]) -> TermStats:
    return TermStats(documents, 10.0, frequencies)


def test_rarity_is_the_rarest_words_idf_as_a_share_of_an_unheld_words() -> None:
    s = stats(600, {"carolin": 300, "lgbtq": 1, "group": 20})

    assert fusion.rarity(query_terms("Caroline LGBTQ group"), s) == pytest.approx(
        s.idf("lgbtq") / s.idf("never-held")
    )
    assert fusion.rarity(query_terms("Caroline"), s) < 0.2
    assert fusion.rarity([], s) == 0.0


def test_the_keyword_weight_rises_from_nothing_to_its_most_between_two_rarities() -> None:
    assert fusion.rarity_weight(0.4, 0.3, 0.5, 0.8) == 0.0
    assert fusion.rarity_weight(0.65, 0.3, 0.5, 0.8) == pytest.approx(0.15)
    assert fusion.rarity_weight(0.95, 0.3, 0.5, 0.8) == pytest.approx(0.3)
    assert fusion.rarity_weight(0.8, 0.3, 0.8, 0.8) == 0.3


def test_adaptive_fusion_reads_bm25_relative_to_the_best_candidates() -> None:
    def candidate(name: str, similarity: float, keyword: float | None) -> Candidate:
        return Candidate(Hit(name, name, name, 0), similarity, keyword=keyword)

    fused = {
        f.candidate.hit.id: f.fused
        for f in fusion.adaptive(
            [candidate("a", 0.5, 8.0), candidate("b", 0.7, 2.0), candidate("c", 0.6, None)], 0.25
        )
    }

    assert fused == pytest.approx({"a": 0.75 * 0.5 + 0.25, "b": 0.75 * 0.7 + 0.25 * 0.25, "c": 0.75 * 0.6})
    assert [f.fused for f in fusion.adaptive([candidate("d", 0.4, None)], 0.3)] == pytest.approx([0.28])


def test_the_first_query_of_a_process_reads_its_time_though_dateparser_loads_then() -> None:
    # Given a process that has read no date yet (dateparser's data not loaded: a second or more)
    code = (
        "from datetime import UTC, datetime\n"
        "from shared.search.timeframe import timeframe\n"
        "found = timeframe('the otter seen in May 2023', datetime(2024, 1, 1, tzinfo=UTC))\n"
        "print(found.start.isoformat() if found else None)\n"
    )
    # When its first query names a time, Then the time is read: the load is not the query's budget
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "2023-05-01T00:00:00+00:00"


def test_pieces_that_do_not_read_as_one_date_stay_apart() -> None:
    # Given a relative time and a date side by side, which dateparser cannot read as one
    found = _read("what did she get two weeks before August 11, 2023", NOW)
    # Then the first is read alone, as it was before pieces were joined
    assert found is not None and found.said == "two weeks before", found


def test_a_bare_weekday_short_form_in_a_keyword_query_names_no_time() -> None:
    assert _read("pet turtles basking sun", NOW) is None


def test_a_month_before_the_number_is_part_of_the_phrase() -> None:
    # Given a date dateparser finds as its year alone ("2023")
    found = _read("What did John do the week before August 3, 2023?", NOW)
    # Then it is read as the day, the window open before it (not the year, nor March: "3, 2023")
    assert found is not None and found.said == "August 3, 2023", found
    assert found.start is None and found.end == day(2023, 8, 3), found
