"""Hypothesis strategies of what Engram takes, built from the rules as docs/reference/http-api.md
states them, not from the validators: so a property test or the API fuzzer finds where the two
disagree."""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime, timedelta, timezone

from hypothesis import strategies as st

# Letters, marks, numbers, punctuation, symbols and spaces: every assigned character an identifier
# may hold (no controls, format, surrogates, private use, unassigned, line or paragraph separators).
_ID_CHARACTERS = st.characters(categories=("L", "M", "N", "P", "S", "Zs"))
_READABLE = st.characters(categories=("L", "N", "P", "S"), exclude_characters="\ufffd")


def _one_form(text: str) -> str:
    return unicodedata.normalize("NFC", text).strip()


def identifiers(max_size: int = 24) -> st.SearchStrategy[str]:
    """Identifiers in their one form: NFC, no white space at either end, nothing unseen."""
    plain = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_./", min_size=1, max_size=max_size)
    wide = st.text(alphabet=_ID_CHARACTERS, min_size=1, max_size=max_size)
    return st.one_of(plain, wide).map(_one_form).filter(lambda text: 0 < len(text) <= 256)


def readable_texts(max_size: int = 200) -> st.SearchStrategy[str]:
    """Text with at least one letter, number, punctuation or symbol (not U+FFFD) among anything."""
    around = st.text(max_size=max_size // 2)
    return st.tuples(around, _READABLE, around).map("".join)


_OFFSETS = st.integers(min_value=-18 * 60, max_value=18 * 60).map(lambda m: timezone(timedelta(minutes=m)))


def storable_moments() -> st.SearchStrategy[datetime]:
    """Moments Neo4j stores: an offset within +-18:00, within years 1-9999 in UTC."""
    return st.builds(
        lambda moment, offset: moment.replace(tzinfo=UTC).astimezone(offset),
        st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
        _OFFSETS,
    )


def rfc3339_moments() -> st.SearchStrategy[str]:
    """Storable moments as RFC 3339 text (the OpenAPI ``date-time`` format)."""
    return storable_moments().map(lambda moment: moment.isoformat())
