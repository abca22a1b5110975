"""Properties of reading JSONL for the CLI: any file is read whole or refused with its line named,
never half-read and never another error; a line is taken as strictly as an HTTP body is."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from producers.cli.files import read_documents
from shared.errors import InvalidInput
from shared.models import DocumentIn
from tests.strategies import identifiers, readable_texts, rfc3339_moments

DEFAULTS: dict[str, Any] = {"user_id": "alice", "project_id": "p1"}


def _read(content: bytes) -> list[DocumentIn] | str:
    """The documents read from a JSONL file of ``content``, or the InvalidInput's message."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "in.jsonl"
        path.write_bytes(content)
        try:
            return read_documents([path], DEFAULTS)
        except InvalidInput as exc:
            return str(exc)


def _some_ids_as_beir_names(record: dict[str, Any]) -> dict[str, Any]:
    """Half the records name their id "_id", as BEIR corpora do."""
    beir = len(str(record["text"])) % 2 == 1
    return {("_id" if key == "id" and beir else key): value for key, value in record.items()}


RECORDS = st.fixed_dictionaries(
    {"text": readable_texts(60)},
    optional={
        "user_id": identifiers(),
        "id": identifiers(),
        "session_id": identifiers(),
        "title": st.text(max_size=20),
        "tags": st.lists(identifiers(), max_size=3),
        "importance": st.floats(0, 1),
        "metadata": st.dictionaries(
            identifiers(), st.none() | st.booleans() | st.integers() | st.text(max_size=8)
        ),
        "created_at": rfc3339_moments(),
    },
).map(_some_ids_as_beir_names)
NEWLINES = st.sampled_from(["\n", "\r\n", "\n\n", "\n  \n", "\r"])


@given(st.lists(st.tuples(RECORDS, NEWLINES), min_size=1, max_size=6), st.booleans(), st.booleans())
@settings(max_examples=200)
def test_valid_lines_are_read_as_written_in_order(
    lines: list[tuple[dict[str, Any], str]], bom: bool, ascii_only: bool
) -> None:
    # Given valid records, one a line, with any line ends, blank lines and maybe a byte order mark
    text = "".join(json.dumps(record, ensure_ascii=ascii_only) + end for record, end in lines)
    content = ("\ufeff" if bom else "").encode() + text.encode("utf-8")

    # When the file is read
    documents = _read(content)

    # Then each line is one document, its own fields over the defaults, "_id" read as "id"
    expected = [
        DocumentIn.model_validate(
            {"source": "cli", **DEFAULTS, **{("id" if k == "_id" else k): v for k, v in record.items()}}
        )
        for record, _ in lines
    ]
    assert documents == expected


LINES = st.one_of(
    st.binary(max_size=60),
    st.text(alphabet='{}[]",:0123456789.-eE \\ntrufalsNaIiyud8_', max_size=60).map(str.encode),
    st.integers(1, 5_000).map(lambda depth: b"[" * depth + b"]" * depth),
    st.integers(1, 5_000).map(lambda depth: b'{"text": ' * depth + b"1" + b"}" * depth),
    RECORDS.map(lambda record: json.dumps(record).encode()),
)


@given(st.lists(LINES, min_size=1, max_size=4))
@settings(max_examples=300)
def test_any_file_is_read_whole_or_refused_naming_its_line(lines: list[bytes]) -> None:
    # Given any bytes a line, JSON or not, nested deep or not
    # When the file is read (any other exception fails the test)
    outcome = _read(b"\n".join(lines))

    # Then its documents come back, or an InvalidInput that names the file and a line
    if isinstance(outcome, str):
        assert "in.jsonl" in outcome
    else:
        assert 0 < len(outcome) <= len(lines)


@given(
    RECORDS,
    st.sampled_from(
        [
            ('"user_id": "mallory", ', "appears twice"),  # user_id given twice: the edge refuses it too
            ('"importance": NaN, ', "NaN"),
            ('"metadata": {"x": Infinity}, ', "Infinity"),
            ('"title": "\\ud800", ', "surrogate"),
            ('"_id": "a", "id": "b", ', "_id"),
        ]
    ),
    st.integers(1, 3),
)
def test_a_line_the_edge_would_refuse_is_refused_naming_it(
    record: dict[str, Any], spoiler: tuple[str, str], number: int
) -> None:
    # Given a file whose line `number` holds what an HTTP body may not (or two names for the id)
    record = {key: value for key, value in record.items() if key not in ("_id", "id", "importance")}
    record.pop("metadata", None)
    record.pop("title", None)
    fields, named = spoiler
    bad = ("{" + fields + json.dumps({"user_id": "alice", **record})[1:]).encode()
    good = json.dumps({"text": "Fine."}).encode()
    lines = [good] * (number - 1) + [bad] + [good]

    # When the file is read
    outcome = _read(b"\n".join(lines))

    # Then nothing is read: the file's line is named, and what is wrong with it
    assert isinstance(outcome, str), outcome
    assert f"in.jsonl:{number}:" in outcome
    assert named in outcome
