"""Progress.count_states: documents by state for /metrics, counted page by page inside Redis."""

from __future__ import annotations

import fakeredis

from shared.progress import Progress


def test_documents_are_counted_by_state_across_pages_and_other_keys_are_not() -> None:
    # Given records in three states, more than one page of them, and keys that are not records
    client = fakeredis.FakeRedis()
    progress = Progress(client, 3600)
    progress.set([(f"d-{i}", 1) for i in range(25)], "done")
    progress.set([(f"d-{i}", 1) for i in range(25, 32)], "embedding")
    progress.set([("d-40", 2)], "failed", "write: boom")
    client.set("engram:staging:x", "not a record")
    client.rpush("ingest", "a message")

    # When they are counted ten keys a page
    counts = progress.count_states(page=10)

    # Then each state has its documents
    assert counts == {"done": 25, "embedding": 7, "failed": 1}


def test_no_records_count_nothing() -> None:
    assert Progress(fakeredis.FakeRedis(), 3600).count_states() == {}
