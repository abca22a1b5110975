"""read_documents: text files, folders and JSONL become validated documents, or one clear error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from producers.cli.files import read_documents
from shared.errors import InvalidInput

DEFAULTS: dict[str, Any] = {"user_id": "alice", "project_id": "p1"}


def _jsonl(path: Path, *records: object) -> Path:
    path.write_text("\n".join(json.dumps(record) for record in records) + "\n", encoding="utf-8")
    return path


def test_folder_of_text_files_gives_one_document_per_file(tmp_path: Path) -> None:
    # Given a folder with text, markdown, a nested file and files of other kinds
    (tmp_path / "a.txt").write_text("Alpha text.", encoding="utf-8")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "b.md").write_text("# Bravo\n\nBody.", encoding="utf-8")
    (tmp_path / "image.png").write_bytes(b"\x89PNG\r\n")
    (tmp_path / "script.py").write_text("print('x')", encoding="utf-8")

    # When it is read
    documents = read_documents([tmp_path], DEFAULTS)

    # Then ids are relative posix paths, titles the stems, defaults filled in
    assert [(d.id, d.title, d.text) for d in documents] == [
        ("a.txt", "a", "Alpha text."),
        ("notes/b.md", "b", "# Bravo\n\nBody."),
    ]
    for document in documents:
        assert document.user_id == "alice"
        assert document.project_id == "p1"
        assert document.source == "cli"
    assert documents[1].uri == (tmp_path / "notes" / "b.md").resolve().as_uri()


def test_single_text_file_is_named_by_its_file_name(tmp_path: Path) -> None:
    path = tmp_path / "Report 2024.TXT"
    path.write_text("Zoë's report 東京.", encoding="utf-8")

    (document,) = read_documents([path], DEFAULTS)

    assert document.id == "Report 2024.TXT"
    assert document.title == "Report 2024"
    assert document.text == "Zoë's report 東京."


def test_jsonl_with_beir_ids_and_defaults(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path / "corpus.jsonl",
        {"_id": "4380635", "title": "", "text": "Fahrenheit scale.", "metadata": {}},
        {"_id": "8757180", "title": "Monotonic", "text": "Always increasing."},
    )

    documents = read_documents([path], DEFAULTS)

    assert [(d.id, d.title, d.text) for d in documents] == [
        ("4380635", "", "Fahrenheit scale."),
        ("8757180", "Monotonic", "Always increasing."),
    ]
    assert all(d.user_id == "alice" and d.project_id == "p1" and d.source == "cli" for d in documents)
    assert documents[0].metadata == {}


def test_a_lines_own_fields_win_over_the_defaults(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path / "docs.jsonl",
        {"id": "d1", "text": "Own scope.", "user_id": "bob", "project_id": "own", "source": "crawler"},
        {"id": "d2", "text": "Default scope."},
    )

    own, default = read_documents([path], {**DEFAULTS, "memory_type": "note"})

    assert (own.user_id, own.project_id, own.source, own.memory_type) == ("bob", "own", "crawler", "note")
    assert (default.user_id, default.project_id, default.source, default.memory_type) == (
        "alice",
        "p1",
        "cli",
        "note",
    )


def test_blank_lines_are_skipped_and_numbering_follows_the_file(tmp_path: Path) -> None:
    path = tmp_path / "docs.ndjson"
    path.write_text('\n{"id": "d1", "text": "one"}\n\n   \n{"id": "d2", "text": "two"}\n', encoding="utf-8")

    documents = read_documents([path], DEFAULTS)

    assert [d.id for d in documents] == ["d1", "d2"]


def test_folder_mixes_text_and_jsonl(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("Text file.", encoding="utf-8")
    _jsonl(tmp_path / "b.jsonl", {"id": "j1", "text": "Json line."})

    documents = read_documents([tmp_path], DEFAULTS)

    assert [d.id for d in documents] == ["a.md", "j1"]


def test_several_paths_are_read_in_order(tmp_path: Path) -> None:
    first, second = tmp_path / "z.txt", tmp_path / "a.txt"
    first.write_text("Z.", encoding="utf-8")
    second.write_text("A.", encoding="utf-8")

    assert [d.id for d in read_documents([first, second], DEFAULTS)] == ["z.txt", "a.txt"]


def test_non_utf8_text_file_is_refused_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "good.txt").write_text("Fine.", encoding="utf-8")
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("café".encode("latin-1"))

    with pytest.raises(InvalidInput, match="UTF-8") as exc:
        read_documents([tmp_path], DEFAULTS)

    assert str(bad) in str(exc.value)


def test_non_utf8_jsonl_line_is_refused_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_bytes(b'{"id": "d1", "text": "ok"}\n{"id": "d2", "text": "caf\xe9"}\n')

    with pytest.raises(InvalidInput, match="UTF-8") as exc:
        read_documents([path], DEFAULTS)

    assert f"{path}:2:" in str(exc.value)


def test_bad_json_line_is_refused_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text(
        '{"id": "d1", "text": "ok"}\n{"id": "d2", "text": \n{"id": "d3", "text": "ok"}\n', encoding="utf-8"
    )

    with pytest.raises(InvalidInput) as exc:
        read_documents([path], DEFAULTS)

    assert str(exc.value).startswith(f"{path}:2: the line is not JSON")


def test_json_line_that_is_not_an_object_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text('{"id": "d1", "text": "ok"}\n["a", "list"]\n', encoding="utf-8")

    with pytest.raises(InvalidInput, match="JSON object") as exc:
        read_documents([path], DEFAULTS)

    assert f"{path}:2:" in str(exc.value)


def test_unknown_field_is_refused_naming_line_and_field(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path / "docs.jsonl", {"id": "d1", "text": "ok"}, {"id": "d2", "text": "ok", "colour": "red"}
    )

    with pytest.raises(InvalidInput) as exc:
        read_documents([path], DEFAULTS)

    message = str(exc.value)
    assert message.startswith(f"{path}:2: ")
    assert "colour" in message


def test_blank_text_line_is_refused_naming_the_field(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "docs.jsonl", {"id": "d1", "text": "   "})

    with pytest.raises(InvalidInput) as exc:
        read_documents([path], DEFAULTS)

    assert str(exc.value).startswith(f"{path}:1: text: ")


def test_empty_text_file_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.txt"
    path.write_text("\n\n", encoding="utf-8")

    with pytest.raises(InvalidInput) as exc:
        read_documents([path], DEFAULTS)

    assert str(exc.value).startswith(f"{path}: text: ")


def test_missing_user_is_refused(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "docs.jsonl", {"id": "d1", "text": "ok"})

    with pytest.raises(InvalidInput, match="user_id"):
        read_documents([path], {})


def test_empty_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "only.png").write_bytes(b"\x89PNG")

    with pytest.raises(InvalidInput, match="no documents found"):
        read_documents([tmp_path], DEFAULTS)


def test_missing_path_is_refused_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"

    with pytest.raises(InvalidInput) as exc:
        read_documents([missing], DEFAULTS)

    assert str(missing) in str(exc.value)


def test_a_bad_path_after_good_ones_still_fails_the_whole_load(tmp_path: Path) -> None:
    good = _jsonl(tmp_path / "good.jsonl", {"id": "d1", "text": "ok"})

    with pytest.raises(InvalidInput):
        read_documents([good, tmp_path / "missing"], DEFAULTS)
