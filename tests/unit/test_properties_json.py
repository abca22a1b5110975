"""Properties of the edge's strict JSON check: it never fails any other way than StrictJsonError,
and takes whatever json.dumps makes of valid data."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from producers.http.wire import StrictJsonError, check_json

SCALARS = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=25,
)
# Bytes near JSON: its punctuation, words, escapes and a few others, so the parser gets far.
JSONISH = st.text(alphabet='{}[]",:0123456789.-+eE \\/ntrufalsNaIiyud8\x00\u00e9\U0001f600', max_size=80)


def _outcome(body: bytes) -> str | None:
    """None when taken, else the StrictJsonError's message; any other exception fails the test."""
    try:
        check_json(body)
    except StrictJsonError as exc:
        return str(exc)
    return None


@given(st.binary(max_size=200) | JSONISH.map(lambda text: text.encode("utf-8", "surrogatepass")))
@settings(max_examples=500)
def test_any_body_is_taken_or_refused_with_a_reason(body: bytes) -> None:
    # Given any bytes at all
    # When they are checked
    refused = _outcome(body)

    # Then they are refused with a reason, or they are JSON Python reads back as it is
    if refused is None:
        json.loads(body.decode("utf-8"))
    else:
        assert refused.strip()


@given(JSON_VALUES, st.booleans())
def test_what_json_dumps_makes_of_valid_data_is_taken(value: Any, ascii_only: bool) -> None:
    # Given valid data (finite numbers, text without lone surrogates), as json.dumps writes it
    body = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8")

    # When it is checked, Then it is taken
    assert _outcome(body) is None


@given(st.dictionaries(st.text(max_size=8), SCALARS, min_size=1, max_size=5), st.data())
def test_a_key_twice_in_one_object_is_refused_wherever_it_is(
    obj: dict[str, Any], data: st.DataObject
) -> None:
    # Given an object with one of its keys written a second time, nested in a list or not
    key = data.draw(st.sampled_from(sorted(obj)))
    members = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in obj.items()] + [f"{json.dumps(key)}: 1"]
    text = "{" + ", ".join(data.draw(st.permutations(members))) + "}"
    body = data.draw(st.sampled_from([text, f"[{text}]", f'{{"outer": {text}}}'])).encode()

    # When it is checked, Then the duplicate is named
    refused = _outcome(body)
    assert refused is not None
    assert "appears twice" in refused


def _pairs_up(text: str) -> bool:
    """Every surrogate in ``text`` is a high one followed by a low one: UTF-16 for one character."""
    index = 0
    while index < len(text):
        if (
            "\ud800" <= text[index] <= "\udbff"
            and index + 1 < len(text)
            and "\udc00" <= text[index + 1] <= "\udfff"
        ):
            index += 2
            continue
        if "\ud800" <= text[index] <= "\udfff":
            return False
        index += 1
    return True


@given(st.text(alphabet=st.characters(categories=("Cs", "Ll")), max_size=6))
def test_a_string_is_taken_exactly_when_its_surrogates_pair_up(text: str) -> None:
    # Given a string with surrogates escaped as JSON writes them ("\ud83d\ude00" is one character)
    body = json.dumps({"text": text}).encode()

    # When it is checked, Then it is taken if and only if no surrogate is left alone
    refused = _outcome(body)
    assert (refused is None) == _pairs_up(text), refused
    if refused is not None:
        assert "surrogate" in refused


@given(st.sampled_from(["NaN", "Infinity", "-Infinity"]), JSON_VALUES)
def test_non_finite_numbers_are_refused_anywhere(constant: str, value: Any) -> None:
    # Spliced, not replaced: the drawn value may hold the text a replace would look for
    body = f'[{json.dumps(value)}, {{"n": {constant}}}]'.encode()

    refused = _outcome(body)

    assert refused is not None
    assert "not a JSON number" in refused
