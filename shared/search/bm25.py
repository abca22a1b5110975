"""BM25 of a query in a memory, with the statistics of the tenant's own memories.

Lucene's own score uses the statistics of the whole index: every tenant's memories. So another
tenant's data would move this tenant's keyword scores (and, through them, its order). Here the
index only finds the matches; the score is computed with the tenant's document count, average
length and document frequencies, so it depends on the tenant's data alone.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from shared.search.text import counts_in, counts_of, stems

K1 = 1.2
B = 0.75


@dataclass(frozen=True, slots=True)
class TermStats:
    """The tenant's statistics for the words of one query."""

    documents: int
    """Memories the tenant holds."""
    average_length: float
    """Their mean length, in the model's tokens (``token_count``)."""
    document_frequency: Mapping[str, int]
    """How many of them hold each term (a word's stem, as the index holds it)."""

    def idf(self, term: str) -> float:
        """Lucene's BM25 idf: ln(1 + (N - df + 0.5) / (df + 0.5))."""
        n = max(self.documents, 1)
        df = min(self.document_frequency.get(term, 0), n)
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


class Keywords:
    """The query's words made ready to score many texts: each word's stem and idf found once."""

    def __init__(self, words: Sequence[str], stats: TermStats) -> None:
        self.wanted = Counter(stems(words))
        self._weights = [(term, times * stats.idf(term)) for term, times in self.wanted.items()]
        self._average = max(stats.average_length, 1.0)

    def score(self, content: str, length: int | None = None, vector: str | None = None) -> float:
        """BM25 (k1 1.2, b 0.75, Lucene's formula) of the words in a text; ``length`` in the
        unit of ``stats.average_length`` (its terms when not given). With the text's
        ``term_vector`` and a length, the counts are read from the vector, not the text."""
        if vector is not None and length is not None:
            counts, size = counts_in(vector, self.wanted.keys()), length
        else:
            counts, terms = counts_of(content, self.wanted.keys())
            size = terms if length is None else length
        if not counts:
            return 0.0
        norm = K1 * (1.0 - B + B * size / self._average)
        score = 0.0
        for term, weight in self._weights:
            tf = counts.get(term, 0)
            if tf:
                score += weight * tf * (K1 + 1.0) / (tf + norm)
        return score


def bm25(
    words: Sequence[str],
    content: str,
    stats: TermStats,
    length: int | None = None,
    vector: str | None = None,
) -> float:
    """BM25 of the query's words in one text, each word as its stem (``Keywords.score``)."""
    return Keywords(words, stats).score(content, length, vector)


def bm25_ceiling(words: Sequence[str], stats: TermStats) -> float:
    """The most BM25 the query can give a memory: every word, many times, in a short text. A
    fixed scale per query, so a keyword score can be read as a share of it."""
    return sum(times * stats.idf(term) * (K1 + 1.0) for term, times in Counter(stems(words)).items())
