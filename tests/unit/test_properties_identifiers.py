"""Properties of identifiers and moments: an identifier is taken exactly when it is in its one form,
and is never rewritten, so two different ones never name the same thing; a moment is taken exactly
when Neo4j can store it."""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime, timedelta, timezone

import neo4j.time
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from shared.ids import document_key, memory_id
from shared.models import Identifier, Moment
from tests.strategies import identifiers, storable_moments

IDENTIFIER = TypeAdapter(Identifier)
MOMENT = TypeAdapter(Moment)
_UNSEEN = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")


def _in_one_form(text: str) -> bool:
    """The documented rule (docs/reference/http-api.md), written apart from the validator."""
    return (
        1 <= len(text) <= 256
        and text == text.strip()
        and unicodedata.normalize("NFC", text) == text
        and not any(unicodedata.category(character) in _UNSEEN for character in text)
    )


def _accepted(text: str) -> str | None:
    try:
        return IDENTIFIER.validate_python(text)
    except ValidationError:
        return None


# Identifiers in their form, and the same spoiled the ways look-alikes are made.
_SPOILERS = st.sampled_from(
    ["\u00a0", " ", "\u3000", "\n", "\u200b", "\u2060", "\ufeff", "\x1f", "\ue000", "\u0378"]
)
LOOK_ALIKES = st.one_of(
    identifiers(),
    st.tuples(identifiers(), _SPOILERS, st.booleans()).map(lambda t: t[1] + t[0] if t[2] else t[0] + t[1]),
    st.tuples(identifiers(), _SPOILERS, st.integers(0, 24)).map(lambda t: t[0][: t[2]] + t[1] + t[0][t[2] :]),
    identifiers().map(lambda text: unicodedata.normalize("NFD", text)),
    st.text(max_size=12),
    st.text(alphabet=st.characters(codec=None), max_size=12),
)


@given(LOOK_ALIKES)
@settings(max_examples=1000)
def test_an_identifier_is_taken_exactly_when_it_is_in_its_one_form(text: str) -> None:
    # Given any text: an identifier, a look-alike of one, or anything
    # When it is validated as an identifier
    accepted = _accepted(text)

    # Then it is taken exactly when it is in its one form, and then as it is, never rewritten
    assert (accepted is not None) == _in_one_form(text), ascii(text)
    if accepted is not None:
        assert accepted == text


@given(identifiers(), identifiers(max_size=256))
def test_every_form_the_validator_takes_passes_the_rule(short: str, long: str) -> None:
    for text in (short, long, short * 300):
        assert (_accepted(text) is not None) == _in_one_form(text), ascii(text)


@given(st.lists(LOOK_ALIKES, min_size=2, max_size=6, unique=True), st.integers(0, 3))
def test_no_two_different_identifiers_name_the_same_document_or_memory(texts: list[str], chunk: int) -> None:
    # Given identifiers that are all different (look-alikes of each other among them)
    taken = [text for text in texts if _accepted(text) is not None]
    assume(len(taken) >= 2)

    # When each names a tenant and a document
    pairs = [(tenant, document) for tenant in taken for document in taken]
    documents = {document_key(tenant, document) for tenant, document in pairs}
    memories = {memory_id(tenant, document, chunk) for tenant, document in pairs}

    # Then no two (tenant, document) pairs share a stored id
    assert len(documents) == len(pairs)
    assert len(memories) == len(pairs)


_ANY_OFFSET = st.integers(min_value=-(24 * 60 - 1), max_value=24 * 60 - 1).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)


def _storable(moment: datetime) -> bool:
    """The documented rule: an offset within +-18:00, within years 1-9999 in UTC (naive is UTC)."""
    offset = moment.utcoffset() or timedelta(0)
    if abs(offset) > timedelta(hours=18):
        return False
    utc_seconds = (moment.replace(tzinfo=None) - datetime.min).total_seconds() - offset.total_seconds()
    return 0 <= utc_seconds <= (datetime.max - datetime.min).total_seconds()


@given(st.datetimes(timezones=st.none() | _ANY_OFFSET))
@example(datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1))))
@example(datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=-18))))
@example(datetime.max.replace(tzinfo=timezone(timedelta(hours=-1))))
@example(datetime.max.replace(tzinfo=timezone(timedelta(hours=18))))
@example(datetime(2024, 1, 1, tzinfo=timezone(timedelta(hours=18, minutes=1))))
@settings(max_examples=500)
def test_a_moment_is_taken_exactly_when_neo4j_can_store_it(moment: datetime) -> None:
    # Given any moment, with any offset a datetime may have, or none
    # When it is validated
    try:
        accepted: datetime | None = MOMENT.validate_python(moment)
    except ValidationError:
        accepted = None

    # Then it is taken exactly when it is storable, as the same instant with an offset
    assert (accepted is not None) == _storable(moment), moment
    if accepted is not None:
        assert accepted.tzinfo is not None
        assert accepted.replace(tzinfo=None) == moment.replace(tzinfo=None)
        assert 1 <= accepted.astimezone(UTC).year <= 9999


@given(storable_moments())
def test_a_taken_moment_round_trips_through_the_drivers_datetime(moment: datetime) -> None:
    # Given a moment Engram takes
    accepted = MOMENT.validate_python(moment)

    # When the Neo4j driver converts it as it does to send it, and back
    sent = neo4j.time.DateTime.from_native(accepted)

    # Then it is the same instant at the same offset
    assert sent.to_native() == accepted
    assert sent.utcoffset() == accepted.utcoffset()


@given(
    st.integers(0, 9999),
    st.integers(1, 12),
    st.integers(1, 28),
    st.integers(0, 23),
    st.sampled_from(["Z", "+00:00", "+18:00", "-18:00", "+18:01", "-23:59", "+05:30", ""]),
)
def test_a_date_time_text_is_taken_exactly_when_storable(
    year: int, month: int, day: int, hour: int, offset: str
) -> None:
    # Given an RFC 3339 text as a client sends it, years 0-9999 and any offset
    text = f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:00:00{offset}"
    try:
        parsed: datetime | None = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        parsed = None

    # When it is validated
    try:
        MOMENT.validate_json(f'"{text}"')
        taken = True
    except ValidationError:
        taken = False

    # Then it is taken exactly when it is a moment Neo4j stores
    assert taken == (parsed is not None and _storable(parsed)), text
