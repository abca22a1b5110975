"""Words of queries and memories, as the fulltext index (Lucene's English analyser) reads them,
and the Lucene queries made of them.

The index holds each word's stem (Porter's algorithm, as Lucene's ``PorterStemFilter``), without
English stop words or a possessive ``'s``: "hiking", "hiked" and "hikes" are one term, so a memory
is found by the forms of its words a person says. Keyword scores are computed here, with the same
analysis, so they agree with what the index matched.

No operator or syntax from a user ever reaches Lucene: a query is only its words, sent as they
were said (the index stems them itself; a stem stemmed again is not always the same stem). Han
and Hiragana characters are a word each (the analyser's rule); other words are runs of letters and
digits, an apostrophe inside kept, lower-cased.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import Counter
from collections.abc import Collection, Iterable
from functools import lru_cache

import snowballstemmer

_IDEOGRAPHS = "\u2e80-\u2fff\u3040-\u309f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_IDEOGRAPHS}]|[^\W{_IDEOGRAPHS}]+(?:['\u2019][^\W{_IDEOGRAPHS}]+)*", re.UNICODE)
# The same words in an ASCII text (no ideographs, no curly apostrophe, lower-casing keeps every
# character one character): found in the lower-cased text at once, twice as fast.
_ASCII_TOKEN = re.compile(r"[a-z0-9_]+(?:'[a-z0-9_]+)*")
_POSSESSIVE = re.compile(r"['\u2019]s$")

# Lucene refuses a query of more than 1,024 clauses, and its analyser makes a clause of every
# CJK character: a query's words are kept to this many characters in all, hence clauses.
FULLTEXT_MAX_CHARS = 512
FULLTEXT_MAX_WORDS = 64

# Lucene's English stop words (EnglishAnalyzer): too common to say anything about a match.
STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)


def tokens(text: str) -> list[str]:
    """The words of a text, lower-cased, in order, without a possessive ``'s``."""
    if text.isascii():
        found = _ASCII_TOKEN.findall(text.lower())
        return [word[:-2] if word.endswith("'s") else word for word in found] if "'" in text else found
    words = [token.lower() for token in _TOKEN.findall(text)]
    return [_POSSESSIVE.sub("", word) if "'" in word or "\u2019" in word else word for word in words]


class _Stemmers(threading.local):
    """A Snowball stemmer per thread: one keeps the word it works on in itself, so two threads
    stemming at once (the write worker's pool is threads) corrupt each other's word."""

    def __init__(self) -> None:
        self.porter = snowballstemmer.stemmer("porter")


_STEMMERS = _Stemmers()


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The term the index holds for a word: its Porter stem."""
    return str(_STEMMERS.porter.stemWord(word))


def stems(words: Iterable[str]) -> list[str]:
    return [stem(word) for word in words]


# A query's head: what every stage of a search reads of it (the model, the indexes, the time it
# names), so a search costs what a long question does whatever the query's length.
HEAD_CHARS_PER_WORD = 16


def query_head(text: str, max_words: int) -> str:
    """The query up to the end of its ``max_words``-th word, at most 16 characters a word: a query
    within the bound is kept as it was said."""
    end = len(text)
    for count, match in enumerate(_TOKEN.finditer(text)):
        if count == max_words - 1:
            end = match.end()
        elif count == max_words:  # a word past the bound: the text ends with the last kept
            break
    else:
        end = len(text)
    return text[: min(end, max_words * HEAD_CHARS_PER_WORD)]


def query_terms(text: str) -> list[str]:
    """The words a keyword search looks for, repeats kept (a word said twice weighs twice): stop
    words left out unless nothing else is left, at most 64 words and 512 characters."""
    words: list[str] = []
    room = FULLTEXT_MAX_CHARS
    for word in tokens(text)[:FULLTEXT_MAX_WORDS]:
        if room <= 0:
            break
        words.append(word[:room])
        room -= len(word)
    kept = [word for word in words if word not in STOP_WORDS]
    return kept or words


def term_counts(text: str) -> Counter[str]:
    """The terms the index holds for a text, counted: stems of its words, stop words left out."""
    return Counter(stem(word) for word in tokens(text) if word not in STOP_WORDS)


def counts_of(text: str, terms: Collection[str]) -> tuple[dict[str, int], int]:
    """How often each of ``terms`` is among the text's terms (as ``term_counts`` counts them), and
    how many terms the text has. Only words that may stem to one of ``terms`` are stemmed: Porter's
    rules rewrite a word's end, never its first letter."""
    initials = {term[:1] for term in terms}
    every = "" in initials  # a word Porter stems to nothing ("s")
    found: dict[str, int] = {}
    size = 0
    for word, times in Counter(tokens(text)).items():
        if word in STOP_WORDS:
            continue
        size += times
        if (every or word[:1] in initials) and (term := stem(word)) in terms:
            found[term] = found.get(term, 0) + times
    return found, size


TERM_VECTOR_FORMAT = "tv2"
"""Names how a term vector was made: a change to the words' analysis (``tokens``, ``stem``,
``STOP_WORDS``) or to the format changes it, so a vector made the old way is not read (the text
is counted instead) and ``engram graph backfill`` makes it again. ``tv1`` vectors were made by one
stemmer shared between the write worker's threads, which could give a word another word's stem."""
TERM_VECTOR_PREFIX = TERM_VECTOR_FORMAT + " "
"""How every vector made now begins (what the store's queries check)."""


def term_vector(text: str) -> str:
    """A text's terms with their counts (``term_counts``) as one string the store keeps beside
    the content: ``"tv2 term:n term:n "``, sorted, a space after each. Read by ``counts_in``, it
    spares a search tokenising and stemming every candidate for its keyword score (a term is
    letters, digits and apostrophes: never a space or a colon)."""
    counts = term_counts(text)
    return TERM_VECTOR_PREFIX + "".join(f"{term}:{times} " for term, times in sorted(counts.items()))


def current_vector(vector: str | None) -> str | None:
    """The vector, if it was made the way ``term_vector`` makes one now."""
    return vector if vector is not None and vector.startswith(TERM_VECTOR_PREFIX) else None


def counts_in(vector: str, terms: Collection[str]) -> dict[str, int]:
    """How often each of ``terms`` is among a text's terms, read from its ``term_vector``: what
    ``counts_of`` counts from the text itself."""
    found: dict[str, int] = {}
    for term in terms:
        at = vector.find(f" {term}:")
        if at >= 0:
            start = at + len(term) + 2
            found[term] = int(vector[start : vector.index(" ", start)])
    return found


def _phrase(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


TENANT_TOKEN_DIGITS = 39
"""The digits of a tenant's token: 2**128 has 39."""


@lru_cache(maxsize=4096)
def tenant_token(user_id: str) -> str:
    """The tenant as one term of the fulltext index (``Memory.tenant_token``): the 128 bits of a
    BLAKE2b of its id, as 39 decimal digits. Lucene's English analyser keeps a run of digits as one
    token, unstemmed, so a query for it matches this tenant's Memories and no other's. The id's own
    words did not: a phrase of them matches any id holding the same words in that order
    ("alice-smith" and "Alice Smith", or "t-abc" inside "t-abc-big"), so each match had to be read
    back and its ``user_id`` compared, most of the cost of a word's count."""
    digest = hashlib.blake2b(user_id.encode("utf-8"), digest_size=16).digest()
    return str(int.from_bytes(digest, "big")).zfill(TENANT_TOKEN_DIGITS)


def _tenant_clause(user_id: str) -> str:
    return f"tenant_token:{tenant_token(user_id)}"


def tenant_query(user_id: str, terms: list[str]) -> str | None:
    """A Lucene query for the tenant's memories holding any of the terms: the tenant is a clause
    of the query, so Lucene's limit counts only this tenant's matches."""
    words = sorted(set(terms))
    if not words:
        return None
    return f"{_tenant_clause(user_id)} AND content:({' '.join(_phrase(w) for w in words)})"


def tenant_term_queries(user_id: str, words: list[str]) -> dict[str, str]:
    """One Lucene query per distinct term (stem), keyed by it: the tenant's memories holding it (to
    count them). The query names one of the words said, which the index stems itself."""
    said: dict[str, str] = {}
    for word in sorted(set(words)):
        said.setdefault(stem(word), word)
    tenant = _tenant_clause(user_id)
    return {term: f"{tenant} AND content:{_phrase(word)}" for term, word in said.items()}
