"""Search without services: words, the query cache, BM25, fusion, ranking, shaping, budgets, and
the Searcher over an in-memory store (filters that never starve, tenants that never leak)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np
import pytest

from shared.embedding.base import Embedder, Vectors, normalise
from shared.search import QueryEmbeddingCache
from shared.search.text import (
    _POSSESSIVE,
    _TOKEN,
    TENANT_TOKEN_DIGITS,
    counts_of,
    query_terms,
    stem,
    tenant_query,
    tenant_term_queries,
    tenant_token,
    term_counts,
    tokens,
)


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


# What reaches Lucene: a query is only its words, each quoted


def test_lucene_syntax_and_operators_do_not_survive() -> None:
    terms = query_terms('title:foo AND (bar OR "baz")~2 \\')

    assert terms == ["title", "foo", "bar", "baz", "2"]
    assert (
        tenant_query("t", terms)
        == f'tenant_token:{tenant_token("t")} AND content:("2" "bar" "baz" "foo" "title")'
    )


@pytest.mark.parametrize(
    "text",
    [
        "+cat -dog !bird",
        "a && b || c",
        "wild* card? [1 TO 5] {a TO b}",
        "boost^4 fuzzy~ path/to\\thing",
        "NOT secret",
        "it's Bob\u2019s \"quoted\" don't",
    ],
)
def test_no_lucene_special_character_survives_in_a_word(text: str) -> None:
    terms = query_terms(text)

    assert terms
    assert all(re.fullmatch(r"[\w'\u2019]+", term) for term in terms), terms


@pytest.mark.parametrize("text", ["", "   ", "?!...:-)", '"()"~^*', "\\\\ && || !"])
def test_query_without_words_gives_no_lucene_query(text: str) -> None:
    assert tenant_query("t", query_terms(text)) is None


def test_only_the_first_64_words_are_kept() -> None:
    assert query_terms(" ".join(f"w{i}" for i in range(100))) == [f"w{i}" for i in range(64)]


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


# query_terms and tenant_query


def test_query_terms_drop_stop_words_and_keep_repeats() -> None:
    assert query_terms("What is the capital of France, the capital?") == [
        "what",
        "capital",
        "france",
        "capital",
    ]


def test_a_query_of_stop_words_only_keeps_them() -> None:
    assert query_terms("to be or not to be") == ["to", "be", "or", "not", "to", "be"]


def test_han_characters_are_a_word_each_as_lucene_reads_them() -> None:
    assert tokens("Zoë met 東京 2024") == ["zoë", "met", "東", "京", "2024"]


def test_a_word_keeps_an_inner_apostrophe_and_loses_a_possessive() -> None:
    assert tokens("Alice's dog doesn't bark; James\u2019s does") == [
        "alice",
        "dog",
        "doesn't",
        "bark",
        "james",
        "does",
    ]


def test_the_terms_of_a_text_are_its_stems_without_stop_words() -> None:
    # Given one activity said four ways, as people say it in conversation
    counts = term_counts("We went hiking. She hikes, he hiked, and Alice's hike is the longest")

    # Then the index's terms count it four times, and "the", "and", "is" not at all
    assert counts[stem("hiking")] == counts["hike"] == 4
    assert counts["alic"] == 1
    assert not {"the", "and", "is"} & set(counts)


@pytest.mark.parametrize(
    "text",
    [
        "Alice's dog doesn't bark; JAMES's dogs' owner",
        "Zoë met 東京 2024, Alice\u2019s İstanbul",
        "snake_case and it's 'quoted' o'clock 's",
        "",
    ],
)
def test_an_ascii_text_has_the_words_the_general_rule_finds(text: str) -> None:
    general = [_POSSESSIVE.sub("", word.lower()) for word in _TOKEN.findall(text)]

    assert tokens(text) == general


def test_only_the_terms_asked_are_counted_and_every_term_sized() -> None:
    text = "We went hiking. She hikes, he hiked, and Alice's hike is the longest; s"
    counts = term_counts(text)

    found, size = counts_of(text, {"hike", "alic", "", "absent"})

    assert found == {"hike": 4, "alic": 1, "": counts[""]} and counts[""] == 1
    assert size == sum(counts.values())


def test_each_term_is_counted_once_by_a_word_that_was_said() -> None:
    # "hikes" and "hiking" are one term; the index stems the word sent, so a word is sent as said
    queries = tenant_term_queries("alice", ["hiking", "hikes", "used"])

    alice = tenant_token("alice")
    assert queries == {
        "hike": f'tenant_token:{alice} AND content:"hikes"',
        "us": f'tenant_token:{alice} AND content:"used"',
    }


def test_tenant_query_names_the_tenant_by_its_token_and_quotes_every_word() -> None:
    tenant = 'al"ice\\'
    query = tenant_query(tenant, ["or", "cat", "cat", "not"])

    assert query == f'tenant_token:{tenant_token(tenant)} AND content:("cat" "not" "or")'


def test_a_tenant_is_one_term_of_digits_that_no_other_tenant_shares() -> None:
    # Ids whose words read as one phrase ("alice-smith", "Alice Smith"), or one inside another's
    names = ["alice-smith", "Alice Smith", "alice smith", "t-abc", "t-abc-big", 'al"ice', "ünï", "x" * 256]

    made = [tenant_token(name) for name in names]

    # Then each is its own run of 39 digits (one unstemmed token to Lucene), the same every time
    assert len(set(made)) == len(names)
    assert all(len(t) == TENANT_TOKEN_DIGITS and t.isdigit() and t.isascii() for t in made)
    assert tenant_token("alice-smith") == made[0]


def test_no_words_no_tenant_query() -> None:
    assert tenant_query("alice", []) is None
