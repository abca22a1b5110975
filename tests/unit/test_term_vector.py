"""A Memory's term vector, kept beside its content: the keyword score read from it is the score
read from the text, to the last bit, whatever the text and the query."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import snowballstemmer
from hypothesis import example, given, settings
from hypothesis import strategies as st

from shared.search.bm25 import TermStats, bm25
from shared.search.records import Hit
from shared.search.text import (
    counts_in,
    counts_of,
    current_vector,
    stem,
    stems,
    term_counts,
    term_vector,
    tokens,
)

WORDS = ["hike", "hiking", "hiked", "Alice's", "don't", "s", "the", "東京", "Zoë", "river", "rivers"]
texts = st.lists(st.one_of(st.sampled_from(WORDS), st.text(max_size=12)), max_size=40).map(" ".join)
queries = st.lists(st.one_of(st.sampled_from(WORDS), st.text(min_size=1, max_size=8)), min_size=1, max_size=6)


def test_a_term_vector_is_the_texts_terms_sorted_with_their_counts() -> None:
    vector = term_vector("She hikes; he hiked the river's bend, and the rivers hike")

    assert vector == "tv2 bend:1 he:1 hike:3 river:2 she:1 "
    assert term_vector("") == "tv2 " and term_vector("the a of") == "tv2 "


def test_a_vector_made_another_way_is_not_read() -> None:
    assert current_vector(term_vector("otters")) == term_vector("otters")
    assert current_vector(" otter:1 ") is None and current_vector("tv0 otter:1 ") is None
    assert current_vector("tv1 otter:1 ") is None  # made by a stemmer the threads shared
    assert current_vector(None) is None
    assert Hit.from_row({"id": "m", "content": "otters", "term_vector": "tv0 otter:9 "}).term_vector is None


def test_counts_are_read_for_the_terms_asked_only_and_whole() -> None:
    vector = term_vector("hikes hiker hiker s")

    # "hike" is not "hiker": a term is found only whole
    assert counts_in(vector, {"hike", "hiker", "", "absent"}) == {"hike": 1, "hiker": 2, "": 1}
    # a word "tv2" is a term like any other, never the vector's format
    assert counts_in(term_vector("tv2 tv2 rivers"), {"tv2", "river"}) == {"tv2": 2, "river": 1}


@settings(max_examples=300, deadline=None)
@given(texts, queries)
@example("we hiked a mountain, hikes", ["hiking", "mountains", "s"])
def test_the_vector_counts_what_the_text_counts(text: str, words: list[str]) -> None:
    wanted = set(stems(tokens(" ".join(words))))

    assert counts_in(term_vector(text), wanted) == counts_of(text, wanted)[0]
    assert sum(term_counts(text).values()) == counts_of(text, wanted)[1]


@settings(max_examples=300, deadline=None)
@given(texts, queries, st.integers(min_value=1, max_value=400))
def test_bm25_from_the_vector_is_bm25_from_the_text(text: str, words: list[str], length: int) -> None:
    stats = TermStats(documents=500, average_length=80.0, document_frequency={s: 7 for s in stems(words)})

    assert bm25(words, text, stats, length, term_vector(text)) == bm25(words, text, stats, length)


def test_without_a_length_the_text_is_counted() -> None:
    stats = TermStats(documents=10, average_length=4.0, document_frequency={"otter": 2})
    # a stale vector is not read when the length must come from the text itself
    assert bm25(["otter"], "otter otter", stats, None, "tv2 otter:9 ") == bm25(
        ["otter"], "otter otter", stats
    )


def test_stems_made_at_once_on_several_threads_are_each_words_own() -> None:
    # Given the write worker's threads (pool "threads", concurrency 3) stemming new words at once:
    # one Snowball stemmer shared between them once raised IndexError and failed a batch of 12
    words = [f"{root}{'x' * n}ational" for n in range(40) for root in ("relat", "condit", "ration", "sens")]
    words += [f"{root}{'y' * n}ness" for n in range(40) for root in ("good", "dark", "hopeful")]
    expected = {word: snowballstemmer.stemmer("porter").stemWord(word) for word in words}

    # When eight threads stem them, each a hundred times past the cache
    def stem_all(_: int) -> dict[str, str]:
        return {word: stem.__wrapped__(word) for word in words}

    with ThreadPoolExecutor(max_workers=8) as threads:
        results = list(threads.map(stem_all, range(100)))

    # Then every thread got every word's own stem
    assert all(result == expected for result in results)
