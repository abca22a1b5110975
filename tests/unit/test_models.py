"""The models at the process boundaries refuse bad input with the field named."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any, get_args

import pytest
from pydantic import BaseModel, ValidationError

from shared.ids import default_document_id
from shared.models import DocumentIn, SearchFilters, SearchRequest


def _document(**values: Any) -> DocumentIn:
    return DocumentIn.model_validate({"user_id": "alice", "text": "Some text.", **values})


def _error_fields(exc: pytest.ExceptionInfo[ValidationError]) -> set[str]:
    return {".".join(str(part) for part in error["loc"]) for error in exc.value.errors()}


def test_a_minimal_document_gets_defaults() -> None:
    document = _document()

    assert document.memory_type == "document"
    assert document.importance == 0.5
    assert document.confidence == 1.0
    assert document.tags == []
    assert document.metadata == {}
    assert document.created_at is None


@pytest.mark.parametrize("text", ["", "   ", "\n\t  \r\n"])
def test_blank_text_is_refused(text: str) -> None:
    with pytest.raises(ValidationError) as exc:
        _document(text=text)

    assert _error_fields(exc) == {"text"}


def test_text_is_kept_as_given() -> None:
    assert _document(text="  padded text \n").text == "  padded text \n"


def test_unknown_field_is_refused() -> None:
    with pytest.raises(ValidationError) as exc:
        _document(colour="blue")

    assert _error_fields(exc) == {"colour"}


def test_user_id_is_required() -> None:
    with pytest.raises(ValidationError) as exc:
        DocumentIn.model_validate({"text": "Some text."})

    assert _error_fields(exc) == {"user_id"}


@pytest.mark.parametrize("bad_id", ["a\x00b", "a\x1fb", "line\nbreak", "tab\there", "del\x7f!"])
@pytest.mark.parametrize("field", ["id", "user_id", "project_id", "session_id", "memory_type"])
def test_ids_with_control_characters_are_refused(field: str, bad_id: str) -> None:
    with pytest.raises(ValidationError) as exc:
        _document(**{field: bad_id})

    assert _error_fields(exc) == {field}


def test_control_characters_are_refused_in_tags_and_metadata_keys() -> None:
    with pytest.raises(ValidationError):
        _document(tags=["ok", "bad\x1ftag"])
    with pytest.raises(ValidationError):
        _document(metadata={"bad\x00key": 1})


def test_ids_may_hold_unicode_spaces_inside_and_slashes() -> None:
    document = _document(id="notes/été 東京.md", user_id="alice smith")

    assert document.id == "notes/été 東京.md"
    assert document.user_id == "alice smith"


@pytest.mark.parametrize(
    "bad_id",
    [
        " alice",
        "alice\n",
        "\u00a0alice",  # no-break space
        "alice\u3000",  # ideographic space
        "ali\u200bce",  # zero-width space
        "e\u0301",  # not NFC ("é" decomposed)
        "a\u2028b",  # line separator
        "a\x00b",
    ],
)
def test_ids_not_in_their_one_normal_form_are_refused_not_rewritten(bad_id: str) -> None:
    for field in ("id", "user_id", "session_id", "project_id"):
        with pytest.raises(ValidationError):
            _document(**{field: bad_id})


@pytest.mark.parametrize("bad_id", ["", "   ", "x" * 257])
def test_empty_or_overlong_ids_are_refused(bad_id: str) -> None:
    with pytest.raises(ValidationError):
        _document(id=bad_id)


@pytest.mark.parametrize("importance", [-0.01, 1.01, 5])
def test_importance_out_of_range_is_refused(importance: float) -> None:
    with pytest.raises(ValidationError) as exc:
        _document(importance=importance)

    assert _error_fields(exc) == {"importance"}


@pytest.mark.parametrize("importance", [0.0, 1.0])
def test_importance_bounds_are_accepted(importance: float) -> None:
    assert _document(importance=importance).importance == importance


def test_document_id_is_the_given_id() -> None:
    assert _document(id="doc-7").document_id == "doc-7"


def test_document_id_falls_back_to_the_content_derived_id() -> None:
    document = _document(text="Posted without an id.")

    assert document.id is None
    assert document.document_id == default_document_id("Posted without an id.")
    assert document.document_id == _document(text="Posted without an id.").document_id


def test_naive_created_at_becomes_utc() -> None:
    document = _document(created_at=datetime(2024, 5, 1, 12, 30))

    assert document.created_at == datetime(2024, 5, 1, 12, 30, tzinfo=UTC)
    assert document.created_at is not None and document.created_at.utcoffset() == timedelta(0)


def test_naive_created_at_text_becomes_utc() -> None:
    document = _document(created_at="2024-05-01T12:30:00")

    assert document.created_at == datetime(2024, 5, 1, 12, 30, tzinfo=UTC)


def test_aware_created_at_keeps_its_instant() -> None:
    paris = timezone(timedelta(hours=2))

    document = _document(created_at=datetime(2024, 5, 1, 14, 30, tzinfo=paris))

    assert document.created_at == datetime(2024, 5, 1, 12, 30, tzinfo=UTC)


def test_json_round_trip_keeps_the_document() -> None:
    document = _document(
        id="d", tags=["a", "b"], metadata={"n": 1, "ok": True}, created_at="2024-01-01T00:00:00Z"
    )

    assert DocumentIn.model_validate_json(document.model_dump_json()) == document


def test_search_request_requires_user_id() -> None:
    with pytest.raises(ValidationError) as exc:
        SearchRequest.model_validate({"query": "cats"})

    assert _error_fields(exc) == {"user_id"}


@pytest.mark.parametrize("query", ["", "   ", "\n"])
def test_search_request_refuses_blank_query(query: str) -> None:
    with pytest.raises(ValidationError) as exc:
        SearchRequest.model_validate({"query": query, "user_id": "alice"})

    assert _error_fields(exc) == {"query"}


def test_search_request_refuses_unknown_filter_fields() -> None:
    with pytest.raises(ValidationError) as exc:
        SearchRequest.model_validate({"query": "cats", "user_id": "alice", "filters": {"colour": "red"}})

    assert _error_fields(exc) == {"filters.colour"}


def test_search_request_refuses_unknown_top_level_fields() -> None:
    with pytest.raises(ValidationError) as exc:
        SearchRequest.model_validate({"query": "cats", "user_id": "alice", "limit": 3})

    assert _error_fields(exc) == {"limit"}


def _number_fields(model: type[BaseModel]) -> list[str]:
    """The fields of ``model`` that hold a number (int or float, optional or not)."""
    found = []
    for name, field in model.model_fields.items():
        kinds = {field.annotation, *get_args(field.annotation)}
        kinds |= {arg for kind in kinds for arg in get_args(kind)}
        if kinds & {int, float} and bool not in kinds:
            found.append(name)
    return found


NUMBER_FIELDS = [(model, name) for model in (DocumentIn, SearchRequest) for name in _number_fields(model)]


def test_the_number_fields_are_found() -> None:
    assert {name for _, name in NUMBER_FIELDS} >= {
        "importance",
        "position",
        "top_k",
        "neighbours",
        "token_budget",
    }


@pytest.mark.parametrize("value", ["5", "1", True, False])
@pytest.mark.parametrize(("model", "field"), NUMBER_FIELDS, ids=lambda v: getattr(v, "__name__", v))
def test_every_number_field_refuses_text_and_booleans(
    model: type[BaseModel], field: str, value: object
) -> None:
    """A number is a JSON number, as the OpenAPI document says: "5" and true are not read as 5 and 1
    (the full API fuzz run found token_budget taking them)."""
    required = {"query": "cats"} if model is SearchRequest else {"text": "Some text."}
    with pytest.raises(ValidationError) as exc:
        model.model_validate({"user_id": "alice", **required, field: value})

    assert _error_fields(exc) == {field}


@pytest.mark.parametrize(("field", "value"), [("top_k", 0), ("threshold", 1.5), ("threshold", -1.5)])
def test_search_request_refuses_out_of_range_numbers(field: str, value: float) -> None:
    with pytest.raises(ValidationError) as exc:
        SearchRequest.model_validate({"query": "cats", "user_id": "alice", field: value})

    assert _error_fields(exc) == {field}


def test_search_request_defaults_to_empty_filters() -> None:
    request = SearchRequest.model_validate({"query": "cats", "user_id": "alice"})

    assert request.filters == SearchFilters()
    assert request.top_k is None
    assert request.threshold is None


def test_search_filters_refuse_empty_lists_and_make_dates_utc() -> None:
    with pytest.raises(ValidationError):
        SearchFilters.model_validate({"tags": []})

    filters = SearchFilters.model_validate({"from_date": "2024-01-01T00:00:00", "tags": ["x"]})

    assert filters.from_date == datetime(2024, 1, 1, tzinfo=UTC)
