"""payload_of: what of a Memory goes to Qdrant as its payload."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from shared.vector_sync import payload_of


def _memory() -> dict[str, Any]:
    return {
        "id": "m-1",
        "content": "The cat sat.",
        "content_hash": "abc",
        "user_id": "alice",
        "document_id": "doc-1",
        "chunk_index": 0,
        "tags": ["x", "y"],
        "importance": 0.0,
        "title": None,
        "embedding_model": "all-MiniLM-L6-v2",
        "embedding": [0.1, 0.2, 0.3],
        "vector_sync": "pending",
        "vector_sync_error": "qdrant down",
        "vector_sync_attempts": 2,
        "vector_synced_at": datetime(2024, 5, 3, tzinfo=UTC),
        "created_at": datetime(2024, 5, 1, 12, 30, tzinfo=UTC),
        "ingested_at": datetime(2024, 5, 2, 8, 0, 0, 123456, tzinfo=UTC),
    }


def test_vector_and_sync_state_are_not_in_the_payload() -> None:
    payload = payload_of(_memory())

    for field in (
        "embedding",
        "vector_sync",
        "vector_sync_error",
        "vector_sync_attempts",
        "vector_synced_at",
    ):
        assert field not in payload


def test_datetimes_become_iso_text_and_other_fields_are_kept_as_they_are() -> None:
    payload = payload_of(_memory())

    assert payload == {
        "id": "m-1",
        "content": "The cat sat.",
        "content_hash": "abc",
        "user_id": "alice",
        "document_id": "doc-1",
        "chunk_index": 0,
        "tags": ["x", "y"],
        "importance": 0.0,
        "title": None,
        "embedding_model": "all-MiniLM-L6-v2",
        "created_at": "2024-05-01T12:30:00+00:00",
        "ingested_at": "2024-05-02T08:00:00.123456+00:00",
    }
    assert datetime.fromisoformat(payload["created_at"]) == _memory()["created_at"]


def test_the_memory_itself_is_left_unchanged() -> None:
    memory = _memory()

    payload_of(memory)

    assert memory == _memory()
