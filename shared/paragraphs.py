"""Which paragraphs of a text share a chunk: a tree of whole paragraphs cut where the paragraphs'
own words say, never where a running count of tokens happens to land (issue 19).

A text of paragraphs (blank lines between them) is laid out top down: a run of paragraphs that fits
one chunk is one chunk; a run that does not is cut in two after its *anchor*, the paragraph (not
the last) whose own ``anchor_key`` is lowest, and each half is laid out the same way; a single
paragraph over a chunk is left to the sentence chunker. The cuts form a Cartesian tree over the
paragraph ends (a treap whose priorities are the keys), and the chunks are its largest subtrees
that fit. Nothing here depends on where a paragraph sits or on the paragraphs before it: the
layout of a run is a function of the run's own paragraphs, and a paragraph's key of its own text.

The key is the least hash of the paragraph's sentences (lines count as sentences too), so an edit
of one sentence changes it only when that sentence held the least hash or the new one is lower:
most edits leave the tree's shape as it was.

**What an edit of one paragraph p can change** (paragraphs pairwise distinct: repeated ones tie
on their keys). Call C the chunk that held p before the edit and N the chunk that began with the
paragraph after p, if one did. After the edit, a chunk that is not in the old layout is (a) one
holding p, (b) a chunk of C's other paragraphs, (c) a chunk of N's paragraphs, or (d) the chunk
that now begins with the paragraph after p. So the chunks embedded again are at most
``n + (|C| - 1) + max(1, |N|)``: n the chunks now holding p (one when p fits a chunk, else p's own
sentence chunks), |C| and |N| counted in paragraphs (the last term is 0 when p is the last
paragraph). Why: a run not holding p, and not beginning right after p, has the same text and the
same cut (its inner keys are unchanged), and so does its parent in the tree unless that parent
holds p; its chunks are the old ones unless the parent holding p fitted before (then the run was
inside C) or it lies where p's new key moved the cut after p (inside N, or beginning after p).
This needs a run to fit no better than a run inside it: the chunker judges a run by the sum of
its paragraphs' token counts, which is so. The worst case is an edit that changes p's key and
crosses a chunk's size at once, with C and N of a few paragraphs each. An edit that leaves the
keys' order as it was (so every cut) re-embeds 1 chunk while C with the edit still fits, else the
parts C is cut into: 2, more only when p's part is still over. ``tests/unit/
test_properties_sections.py`` checks both on random texts and edits.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence

PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[\u3002\uff01\uff1f])\s*|\n")

# (first, last) paragraph index of a run, both included.
Run = tuple[int, int]
# A paragraph's anchor key: compared as a pair.
Key = tuple[int, int]


def paragraph_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each paragraph that holds more than white space, without the white space
    at either end: the text between blank lines."""
    spans: list[tuple[int, int]] = []
    start = 0
    for gap in [*PARAGRAPH_BREAK.finditer(text), None]:
        end = len(text) if gap is None else gap.start()
        piece = text[start:end]
        content = piece.strip()
        if content:
            first = start + len(piece) - len(piece.lstrip())
            spans.append((first, first + len(content)))
        if gap is not None:
            start = gap.end()
    return spans


def anchor_key(paragraph: str) -> Key:
    """The least hash of the paragraph's sentences, then the hash of the whole paragraph (two
    paragraphs sharing a sentence still differ): by its own words alone, the same in every process."""
    sentences = [s for s in (part.strip() for part in SENTENCE_END.split(paragraph)) if s]
    return min(map(_hash, sentences), default=0), _hash(paragraph.strip())


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


def layout(keys: Sequence[Key], fits: Callable[[int, int], bool]) -> list[Run]:
    """The runs of paragraphs, in order, each to be one chunk when ``fits(first, last)``, else (a
    single paragraph) to be chunked by sentences. ``keys`` are the paragraphs' anchor keys."""
    runs: list[Run] = []
    stack: list[Run] = [(0, len(keys) - 1)] if keys else []
    while stack:
        first, last = stack.pop()
        if first == last or fits(first, last):
            runs.append((first, last))
            continue
        cut = _anchor(keys, first, last)
        stack.append((cut + 1, last))
        stack.append((first, cut))
    return runs


def _anchor(keys: Sequence[Key], first: int, last: int) -> int:
    """The paragraph of ``first..last - 1`` with the lowest key; among equal keys (the same
    paragraph repeated) the one nearest the run's middle, so repeats never make a long chain."""
    lowest = min(keys[first:last])
    middle = (first + last - 1) / 2
    return min((i for i in range(first, last) if keys[i] == lowest), key=lambda i: abs(i - middle))
