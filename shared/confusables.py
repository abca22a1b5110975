"""Tenant names a person would read as the same: "\u0430lice" (a Cyrillic a) beside "alice".

Two names are confusable when their skeletons agree (Unicode TR39 §4): each character, after
NFD, replaced by one representative of the characters it can be mistaken for. The table is
Unicode's own ``confusables.txt`` as the ``confusable-homoglyphs`` package ships it; the
representative is the least of a character and its homoglyphs, so both sides of a pair map alike.

``ascii_reading`` needs no other name: a tenant that a reader takes for a plain ASCII name
("\u0430lice", "\uff41lice") is refused where tenants are made (ingestion, keys) unless
``ENGRAM_ALLOW_LOOKALIKE_TENANTS``: two tenants that read alike split one user's memories, or
let a key for one pass for the other on a screen.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from functools import lru_cache

from confusable_homoglyphs import confusables

from shared.errors import InvalidInput


@lru_cache(maxsize=4096)
def _representative(character: str) -> str:
    found = confusables.is_confusable(character, greedy=True)
    glyphs = [character]
    for entry in found or []:
        glyphs += [str(glyph["c"]) for glyph in entry["homoglyphs"]]
    return min(glyphs)


@lru_cache(maxsize=4096)
def _ascii_of(character: str) -> str | None:
    """The ASCII letter or digit a character reads as (NFKC's, else a homoglyph's), if any."""
    folded = unicodedata.normalize("NFKC", character)
    if folded.isascii() and folded.isalnum():
        return folded
    found = confusables.is_confusable(character, greedy=True, preferred_aliases=["latin"])
    for entry in found or []:
        for glyph in entry["homoglyphs"]:
            text = str(glyph["c"])
            if text.isascii() and text.isalnum():
                return text
    return None


def ascii_reading(name: str) -> str | None:
    """The ASCII name ``name`` reads as, when it is not that name: some character of it is not
    ASCII yet reads as an ASCII letter or digit, and the name is Latin beside it (holds ASCII
    letters or digits) or reads as ASCII throughout. "\u0430lice" and "\uff41lice" read as "alice";
    a name of another script ("\u0430\u043b\u0438\u0441\u0430") is its own."""
    mapped = [(c, c if c.isascii() else _ascii_of(c)) for c in name]
    posing = [c for c, reads in mapped if not c.isascii() and reads is not None]
    if not posing:
        return None
    plain = any(c.isascii() and c.isalnum() for c in name)
    if not plain and any(reads is None and c.isalnum() for c, reads in mapped):
        return None
    return "".join(reads if reads is not None else c for c, reads in mapped)


def skeleton(name: str) -> str:
    return "".join(_representative(character) for character in unicodedata.normalize("NFD", name))


def confusable_with(name: str, others: Iterable[str]) -> list[str]:
    """The names of ``others`` (not ``name`` itself) a reader could take for ``name``."""
    mark = skeleton(name)
    return sorted({other for other in others if other != name and skeleton(other) == mark})


def refuse_look_alike(tenant: str, allowed: bool) -> None:
    """Raises ``InvalidInput`` (a 422) for a tenant that reads as another, ASCII name, unless allowed."""
    reads_as = ascii_reading(tenant)
    if reads_as is not None and not allowed:
        raise InvalidInput(
            f"the tenant {tenant!r} reads as {reads_as!r} but is not it (a look-alike character); "
            "refused unless ENGRAM_ALLOW_LOOKALIKE_TENANTS=true"
        )
