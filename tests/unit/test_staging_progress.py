"""Staging and Progress on fakeredis: what one stage stages, the next reads back exactly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import fakeredis
import numpy as np
import pytest

from shared.ids import content_hash, document_key, memory_id
from shared.models import ChunkRecord, DocumentIn, StagedDocument, utc_now
from shared.progress import Progress
from shared.staging import Staging

TTL_S = 3600


@pytest.fixture
def client() -> fakeredis.FakeRedis:
    return fakeredis.FakeRedis()


@pytest.fixture
def staging(client: fakeredis.FakeRedis) -> Staging:
    return Staging(client, ttl_s=TTL_S)


@pytest.fixture
def progress(client: fakeredis.FakeRedis) -> Progress:
    return Progress(client, ttl_s=TTL_S)


def _staged(document_id: str, texts: list[str]) -> StagedDocument:
    document = DocumentIn(
        user_id="alice",
        id=document_id,
        text=" ".join(texts),
        title="Zoë's notes 東京",
        tags=["a", "b"],
        metadata={"n": 3, "ok": True, "none": None, "ratio": 0.25},
        created_at=datetime(2024, 5, 1, 12, 0),
    )
    return StagedDocument(
        document=document,
        key=document_key("alice", document_id),
        content_hash=content_hash(document.text),
        received_at=datetime(2024, 5, 2, 8, 30, tzinfo=UTC),
        chunks=[
            ChunkRecord(
                id=memory_id("alice", document_id, index),
                chunk_index=index,
                content=text,
                content_hash=content_hash(text),
                token_count=len(text.split()),
            )
            for index, text in enumerate(texts)
        ],
    )


# Staging


def test_documents_round_trip(staging: Staging) -> None:
    documents = [_staged("d1", ["first chunk", "second chunk 😀"]), _staged("d2", ["only chunk"])]

    staging.put_documents("batch-1", documents)

    assert staging.documents("batch-1") == documents


def test_missing_batch_reads_as_none(staging: Staging) -> None:
    assert staging.documents("nope") is None
    assert staging.vectors("nope") is None
    assert staging.is_finished("nope") is False


def test_vectors_round_trip_exactly_as_float32(staging: Staging) -> None:
    # Given vectors with values that float16 or text would not keep exactly
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((5, 384)).astype(np.float32)
    vectors[0, 0] = np.float32(1e-38)
    vectors[1, 1] = np.float32(-0.0)

    # When staged and read back
    staging.put_vectors("batch-1", "all-MiniLM-L6-v2", vectors)
    found = staging.vectors("batch-1")

    # Then model, shape, dtype and every bit are the same
    assert found is not None
    model, array = found
    assert model == "all-MiniLM-L6-v2"
    assert array.dtype == np.float32
    assert array.shape == (5, 384)
    assert array.tobytes() == vectors.tobytes()


def test_float64_vectors_are_stored_as_float32(staging: Staging) -> None:
    vectors = np.array([[0.1, 0.2], [0.3, 0.4]], dtype=np.float64)

    staging.put_vectors("b", "m", vectors)  # type: ignore[arg-type]
    found = staging.vectors("b")

    assert found is not None
    np.testing.assert_array_equal(found[1], vectors.astype(np.float32))
    assert found[1].dtype == np.float32


def test_non_contiguous_vectors_keep_their_values(staging: Staging) -> None:
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    view = base[:, ::2]  # every other column: not contiguous

    staging.put_vectors("b", "m", view)
    found = staging.vectors("b")

    assert found is not None
    np.testing.assert_array_equal(found[1], view)


def test_empty_vector_batch_keeps_its_shape(staging: Staging) -> None:
    staging.put_vectors("b", "m", np.zeros((0, 384), dtype=np.float32))
    found = staging.vectors("b")

    assert found is not None
    assert found[1].shape == (0, 384)


def test_staged_parts_expire_after_the_ttl(staging: Staging, client: fakeredis.FakeRedis) -> None:
    staging.put_documents("b", [_staged("d1", ["text"])])
    staging.put_vectors("b", "m", np.ones((1, 4), dtype=np.float32))

    keys = [key.decode() for key in client.keys("*")]

    assert sorted(keys) == [
        "engram:batch:b:documents",
        "engram:batch:b:vectors",
        "engram:batch:b:vectors-header",
    ]
    for key in keys:
        assert 0 < client.ttl(key) <= TTL_S


def test_batches_do_not_see_each_other(staging: Staging) -> None:
    one, two = [_staged("d1", ["one"])], [_staged("d2", ["two"])]
    staging.put_documents("b1", one)
    staging.put_documents("b2", two)

    staging.finish("b1")

    assert staging.documents("b1") is None
    assert staging.documents("b2") == two
    assert not staging.is_finished("b2")


def test_finish_drops_the_parts_and_remembers_the_batch(
    staging: Staging, client: fakeredis.FakeRedis
) -> None:
    # Given a fully staged batch
    staging.put_documents("b", [_staged("d1", ["text"])])
    staging.put_vectors("b", "m", np.ones((1, 4), dtype=np.float32))
    assert not staging.is_finished("b")

    # When it is finished
    staging.finish("b")

    # Then its parts are gone, and that it was written is remembered for a while
    assert staging.documents("b") is None
    assert staging.vectors("b") is None
    assert staging.is_finished("b")
    assert [key.decode() for key in client.keys("*")] == ["engram:batch:b:written"]
    assert 0 < client.ttl("engram:batch:b:written") <= TTL_S


def test_vectors_without_header_read_as_missing(staging: Staging, client: fakeredis.FakeRedis) -> None:
    staging.put_vectors("b", "m", np.ones((2, 4), dtype=np.float32))
    client.delete("engram:batch:b:vectors-header")

    assert staging.vectors("b") is None


# Progress


def test_progress_of_unknown_document_is_none(progress: Progress) -> None:
    assert progress.get("missing") is None


def test_progress_set_then_get(progress: Progress) -> None:
    before = utc_now()

    progress.set(["k1", "k2"], "embedding")

    for key in ("k1", "k2"):
        found = progress.get(key)
        assert found is not None
        state, error, updated_at = found
        assert state == "embedding"
        assert error is None
        assert before - timedelta(seconds=1) <= updated_at <= utc_now()
        assert updated_at.tzinfo is not None


def test_progress_records_the_failure_reason(progress: Progress) -> None:
    progress.set(["k"], "chunking")
    progress.set(["k"], "failed", error="text: too long")

    found = progress.get("k")

    assert found is not None
    assert found[:2] == ("failed", "text: too long")


def test_later_state_clears_an_earlier_error(progress: Progress) -> None:
    progress.set(["k"], "failed", error="boom")
    progress.set(["k"], "queued")

    found = progress.get("k")

    assert found is not None
    assert found[:2] == ("queued", None)


def test_states_in_order_with_unknown_for_missing(progress: Progress) -> None:
    progress.set(["a"], "done")
    progress.set(["c"], "writing")

    assert progress.states(["a", "b", "c", "a"]) == ["done", "unknown", "writing", "done"]
    assert progress.states([]) == []


def test_progress_expires_after_the_ttl(progress: Progress, client: fakeredis.FakeRedis) -> None:
    progress.set(["k"], "queued")

    assert 0 < client.ttl("engram:doc:k") <= TTL_S
