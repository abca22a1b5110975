"""The producer client's pure helpers: document size checks and batching."""

from __future__ import annotations

import pytest

from producers.client import batches, check_document
from shared.errors import DocumentTooLarge, InvalidInput
from shared.models import DocumentIn
from shared.settings import Settings


def _doc(text: str, document_id: str | None = None) -> DocumentIn:
    return DocumentIn(user_id="alice", id=document_id, text=text)


# check_document


def test_document_at_the_limit_is_accepted() -> None:
    settings = Settings(_env_file=None, max_document_bytes=10)

    check_document(_doc("x" * 10), settings)  # no error


def test_document_over_the_limit_is_refused_naming_it() -> None:
    settings = Settings(_env_file=None, max_document_bytes=10)

    with pytest.raises(DocumentTooLarge) as exc:
        check_document(_doc("x" * 11, "big-one"), settings)

    assert "big-one" in str(exc.value)
    assert "11 bytes" in str(exc.value)
    assert isinstance(exc.value, InvalidInput)


def test_document_size_is_counted_in_utf8_bytes() -> None:
    # Five characters, ten bytes
    settings = Settings(_env_file=None, max_document_bytes=9)

    with pytest.raises(DocumentTooLarge):
        check_document(_doc("ééééé"), settings)


# batches


def _ids(groups: list[list[DocumentIn]]) -> list[list[str | None]]:
    return [[d.id for d in group] for group in groups]


def test_batches_hold_at_most_max_documents() -> None:
    documents = [_doc("t", f"d{i}") for i in range(7)]

    groups = list(batches(documents, max_documents=3, max_bytes=1_000_000))

    assert _ids(groups) == [["d0", "d1", "d2"], ["d3", "d4", "d5"], ["d6"]]


def test_batches_keep_every_document_once_and_in_order() -> None:
    documents = [_doc("x" * (i % 5 + 1), f"d{i}") for i in range(50)]

    groups = list(batches(documents, max_documents=4, max_bytes=9))

    assert [d for group in groups for d in group] == documents
    assert all(group for group in groups)


def test_batches_close_before_the_size_limit_is_passed() -> None:
    documents = [_doc("x" * 4, "a"), _doc("x" * 4, "b"), _doc("x" * 4, "c")]

    groups = list(batches(documents, max_documents=100, max_bytes=8))

    assert _ids(groups) == [["a", "b"], ["c"]]


def test_a_document_larger_than_max_bytes_travels_alone() -> None:
    documents = [_doc("small", "a"), _doc("x" * 50, "huge"), _doc("tiny", "b")]

    groups = list(batches(documents, max_documents=100, max_bytes=10))

    assert _ids(groups) == [["a"], ["huge"], ["b"]]


def test_batch_size_limit_counts_utf8_bytes() -> None:
    # Given two documents of five characters but ten UTF-8 bytes each
    documents = [_doc("ééééé", "a"), _doc("ééééé", "b")]

    # When batched with a 10-byte limit
    groups = list(batches(documents, max_documents=100, max_bytes=10))

    # Then they cannot share a batch: together they are 20 bytes
    assert _ids(groups) == [["a"], ["b"]]


def test_no_documents_give_no_batches() -> None:
    assert list(batches([], max_documents=10, max_bytes=10)) == []
