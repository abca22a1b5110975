"""Tenant names a person would read as the same: "\u0430lice" (a Cyrillic a) beside "alice".

Two names are confusable when their skeletons agree (Unicode TR39 §4): each character, after
NFD, replaced by one representative of the characters it can be mistaken for. The table is
Unicode's own ``confusables.txt`` as the ``confusable-homoglyphs`` package ships it; the
representative is the least of a character and its homoglyphs, so both sides of a pair map alike.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from functools import lru_cache

from confusable_homoglyphs import confusables


@lru_cache(maxsize=4096)
def _representative(character: str) -> str:
    found = confusables.is_confusable(character, greedy=True)
    glyphs = [character]
    for entry in found or []:
        glyphs += [str(glyph["c"]) for glyph in entry["homoglyphs"]]
    return min(glyphs)


def skeleton(name: str) -> str:
    return "".join(_representative(character) for character in unicodedata.normalize("NFD", name))


def confusable_with(name: str, others: Iterable[str]) -> list[str]:
    """The names of ``others`` (not ``name`` itself) a reader could take for ``name``."""
    mark = skeleton(name)
    return sorted({other for other in others if other != name and skeleton(other) == mark})
