"""Words of queries and memories, as the fulltext index (Lucene's standard analyser) reads them,
and the Lucene queries made of them.

No operator or syntax from a user ever reaches Lucene: a query is only its words. Han and
Hiragana characters are a word each (the analyser's rule); other words are runs of letters and
digits, lower-cased.
"""

from __future__ import annotations

import re
from collections import Counter

_IDEOGRAPHS = "\u2e80-\u2fff\u3040-\u309f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_IDEOGRAPHS}]|[^\W{_IDEOGRAPHS}]+", re.UNICODE)
_WORD = re.compile(r"\w+", re.UNICODE)
_LUCENE_OPERATORS = {"AND", "OR", "NOT", "TO"}

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
    """The words of a text, lower-cased, in order."""
    return [token.lower() for token in _TOKEN.findall(text)]


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
    return Counter(tokens(text))


def _phrase(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def tenant_query(user_id: str, terms: list[str]) -> str | None:
    """A Lucene query for the tenant's memories holding any of the terms: the tenant is a clause
    of the query, so Lucene's limit counts only this tenant's matches."""
    words = sorted(set(terms))
    if not words:
        return None
    return f"user_id:{_phrase(user_id)} AND content:({' '.join(_phrase(w) for w in words)})"


def tenant_term_queries(user_id: str, terms: list[str]) -> dict[str, str]:
    """One Lucene query per distinct term: the tenant's memories holding it (to count them)."""
    return {word: f"user_id:{_phrase(user_id)} AND content:{_phrase(word)}" for word in sorted(set(terms))}


def fulltext_query(text: str) -> str | None:
    """The query's words as a plain Lucene OR-query, case kept: no operator or syntax from the
    user survives, and never more clauses than Lucene takes (a long query is cut, not refused)."""
    words: list[str] = []
    room = FULLTEXT_MAX_CHARS
    for word in _WORD.findall(text)[:FULLTEXT_MAX_WORDS]:
        if room <= 0:
            break
        word = word[:room]
        room -= len(word)
        words.append(word.lower() if word in _LUCENE_OPERATORS else word)
    return " ".join(words) or None
