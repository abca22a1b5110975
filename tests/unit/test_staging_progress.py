"""Staging and Progress on fakeredis: what one stage stages, the next reads back exactly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import cast

import fakeredis
import numpy as np
import pytest

from shared.ids import content_hash, document_key, memory_id
from shared.models import ChunkRecord, DocumentIn, StagedDocument, utc_now
from shared.progress import Progress, ProgressRecord
from shared.staging import Staging

TTL_S = 3600


@pytest.fixture
def client() -> fakeredis.FakeRedis:
    return fakeredis.FakeRedis()


def _keys(client: fakeredis.FakeRedis) -> list[str]:
    return [key.decode() for key in cast(list[bytes], client.keys("*"))]


def _ttl(client: fakeredis.FakeRedis, key: str) -> int:
    return cast(int, client.ttl(key))


@pytest.fixture
def staging(client: fakeredis.FakeRedis) -> Staging:
    return Staging(client, ttl_s=TTL_S)


@pytest.fixture
def progress(client: fakeredis.FakeRedis) -> Progress:
    return Progress(client, ttl_s=TTL_S)


def _staged(document_id: str, texts: list[str], version: int = 1) -> StagedDocument:
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
        version=version,
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
    documents = [_staged("d1", ["first chunk", "second chunk 😀"], version=7), _staged("d2", ["only chunk"])]

    staging.put_documents("batch-1", documents)

    assert staging.documents("batch-1") == documents


def test_missing_batch_reads_as_none(staging: Staging) -> None:
    assert staging.documents("nope") is None
    assert staging.vector_slices("nope") == {}
    assert staging.vectors("nope", 3) is None
    assert staging.is_finished("nope") is False


def test_vectors_round_trip_exactly_as_float32(staging: Staging) -> None:
    # Given vectors with values that float16 or text would not keep exactly
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((5, 384)).astype(np.float32)
    vectors[0, 0] = np.float32(1e-38)
    vectors[1, 1] = np.float32(-0.0)

    # When staged as one slice and read back
    staging.put_vector_slice("batch-1", 0, "all-MiniLM-L6-v2", vectors)
    found = staging.vectors("batch-1", 5)

    # Then model, shape, dtype and every bit are the same
    assert found is not None
    model, array = found
    assert model == "all-MiniLM-L6-v2"
    assert array.dtype == np.float32
    assert array.shape == (5, 384)
    assert array.tobytes() == vectors.tobytes()


def test_slices_are_joined_in_chunk_order_whatever_order_they_were_staged(staging: Staging) -> None:
    # Given a batch of 5 chunks embedded as slices 0-1, 2-3 and 4, the last one staged first
    vectors = np.arange(20, dtype=np.float32).reshape(5, 4)
    staging.put_vector_slice("b", 4, "m", vectors[4:])
    staging.put_vector_slice("b", 0, "m", vectors[:2])
    staging.put_vector_slice("b", 2, "m", vectors[2:4])

    # When the batch's vectors are read
    found = staging.vectors("b", 5)

    # Then they are the chunks' vectors in order
    assert found is not None
    np.testing.assert_array_equal(found[1], vectors)
    assert sorted(staging.vector_slices("b")) == [0, 2, 4]


def test_vectors_with_a_slice_missing_read_as_none(staging: Staging) -> None:
    staging.put_vector_slice("b", 0, "m", np.ones((2, 4), dtype=np.float32))
    staging.put_vector_slice("b", 4, "m", np.ones((1, 4), dtype=np.float32))

    assert staging.vectors("b", 5) is None


def test_vectors_of_more_chunks_than_the_batch_has_read_as_none(staging: Staging) -> None:
    staging.put_vector_slice("b", 0, "m", np.ones((3, 4), dtype=np.float32))

    assert staging.vectors("b", 2) is None
    assert staging.vectors("b", 3) is not None


def test_slices_of_two_models_read_as_none(staging: Staging) -> None:
    staging.put_vector_slice("b", 0, "model-a", np.ones((1, 4), dtype=np.float32))
    staging.put_vector_slice("b", 1, "model-b", np.ones((1, 4), dtype=np.float32))

    assert staging.vectors("b", 2) is None


def test_float64_vectors_are_stored_as_float32(staging: Staging) -> None:
    vectors = np.array([[0.1, 0.2], [0.3, 0.4]], dtype=np.float64)

    staging.put_vector_slice("b", 0, "m", vectors)  # type: ignore[arg-type]
    found = staging.vectors("b", 2)

    assert found is not None
    np.testing.assert_array_equal(found[1], vectors.astype(np.float32))
    assert found[1].dtype == np.float32


def test_non_contiguous_vectors_keep_their_values(staging: Staging) -> None:
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    view = base[:, ::2]  # every other column: not contiguous

    staging.put_vector_slice("b", 0, "m", view)
    found = staging.vectors("b", 4)

    assert found is not None
    np.testing.assert_array_equal(found[1], view)


def test_empty_vector_slice_keeps_its_shape(staging: Staging) -> None:
    staging.put_vector_slice("b", 0, "m", np.zeros((0, 384), dtype=np.float32))

    slices = staging.vector_slices("b")

    assert slices[0][0] == "m"
    assert slices[0][1].shape == (0, 384)


def test_staged_parts_expire_after_the_ttl(staging: Staging, client: fakeredis.FakeRedis) -> None:
    staging.put_documents("b", [_staged("d1", ["text"])])
    staging.put_vector_slice("b", 0, "m", np.ones((1, 4), dtype=np.float32))

    keys = _keys(client)

    assert sorted(keys) == ["engram:batch:b:documents", "engram:batch:b:vectors"]
    for key in keys:
        assert 0 < _ttl(client, key) <= TTL_S


def test_batches_do_not_see_each_other(staging: Staging) -> None:
    one, two = [_staged("d1", ["one"])], [_staged("d2", ["two"])]
    staging.put_documents("b1", one)
    staging.put_documents("b2", two)
    staging.put_vector_slice("b2", 0, "m", np.ones((1, 4), dtype=np.float32))

    staging.finish("b1")

    assert staging.documents("b1") is None
    assert staging.documents("b2") == two
    assert staging.vectors("b2", 1) is not None
    assert not staging.is_finished("b2")


def test_finish_drops_the_parts_and_remembers_the_batch(
    staging: Staging, client: fakeredis.FakeRedis
) -> None:
    # Given a fully staged batch
    staging.put_documents("b", [_staged("d1", ["text"])])
    staging.put_vector_slice("b", 0, "m", np.ones((1, 4), dtype=np.float32))
    assert not staging.is_finished("b")

    # When it is finished
    staging.finish("b")

    # Then its parts are gone, and that it was written is remembered for a while
    assert staging.documents("b") is None
    assert staging.vectors("b", 1) is None
    assert staging.is_finished("b")
    assert _keys(client) == ["engram:batch:b:written"]
    assert 0 < _ttl(client, "engram:batch:b:written") <= TTL_S


def test_slice_without_header_reads_as_missing(staging: Staging, client: fakeredis.FakeRedis) -> None:
    staging.put_vector_slice("b", 0, "m", np.ones((2, 4), dtype=np.float32))
    client.hdel("engram:batch:b:vectors", "0:header")

    assert staging.vector_slices("b") == {}
    assert staging.vectors("b", 2) is None


# Progress


def _state(found: ProgressRecord | None) -> tuple[str, int, str | None]:
    assert found is not None
    return found.state, found.version, found.error


def test_progress_of_unknown_document_is_none(progress: Progress) -> None:
    assert progress.get("missing") is None


def test_progress_set_then_get(progress: Progress) -> None:
    before = utc_now()

    progress.set([("k1", 5), ("k2", 6)], "embedding")

    for key, version in (("k1", 5), ("k2", 6)):
        found = progress.get(key)
        assert found is not None
        assert (found.state, found.version, found.error) == ("embedding", version, None)
        assert before - timedelta(seconds=1) <= found.updated_at <= utc_now()
        assert found.updated_at.tzinfo is not None


def test_progress_records_the_failure_reason(progress: Progress) -> None:
    progress.set([("k", 1)], "chunking")
    progress.set([("k", 1)], "failed", error="text: too long")

    assert _state(progress.get("k")) == ("failed", 1, "text: too long")


def test_a_newer_version_clears_an_earlier_error(progress: Progress) -> None:
    progress.set([("k", 1)], "failed", error="boom")
    progress.set([("k", 2)], "queued")

    assert _state(progress.get("k")) == ("queued", 2, None)


def test_news_of_an_older_version_is_dropped(progress: Progress) -> None:
    # Given version 2 already done
    progress.set([("k", 2)], "done")

    # When version 1's worker reports late, even a failure
    progress.set([("k", 1)], "writing")
    progress.set([("k", 1)], "failed", error="late")

    # Then the record still speaks of version 2
    assert _state(progress.get("k")) == ("done", 2, None)


def test_an_earlier_stage_of_the_same_version_is_dropped(progress: Progress) -> None:
    # Given a worker already chunking version 3
    progress.set([("k", 3)], "chunking")

    # When the producer's "queued" for that version lands after it
    progress.set([("k", 3)], "queued")

    # Then the record does not move backwards
    assert _state(progress.get("k")) == ("chunking", 3, None)


def test_a_later_stage_of_the_same_version_moves_on(progress: Progress) -> None:
    for state in ("queued", "chunking", "embedding", "writing", "done"):
        progress.set([("k", 3)], state)
        assert _state(progress.get("k"))[:2] == (state, 3)


def test_a_late_failure_of_a_version_that_is_done_is_dropped(progress: Progress) -> None:
    # Given version 2 written and done
    progress.set([("k", 2)], "done")

    # When a duplicate delivery of its batch fails afterwards (its staging already cleaned up)
    progress.set([("k", 2)], "failed", "StagingMissing: batch b has no staged documents")

    # Then the stored document still reads done
    assert _state(progress.get("k")) == ("done", 2, None)


def test_a_failed_version_can_still_end_done(progress: Progress) -> None:
    progress.set([("k", 2)], "failed", "neo4j is unavailable")
    progress.set([("k", 2)], "done")
    assert _state(progress.get("k")) == ("done", 2, None)


def test_records_in_order_with_none_for_missing(progress: Progress) -> None:
    progress.set([("a", 1)], "done")
    progress.set([("c", 2)], "writing")

    found = progress.records(["a", "b", "c", "a"])

    assert [None if r is None else (r.state, r.version) for r in found] == [
        ("done", 1),
        None,
        ("writing", 2),
        ("done", 1),
    ]
    assert progress.records([]) == []


def test_one_call_records_many_documents_each_at_its_version(progress: Progress) -> None:
    # Given more documents than one script call takes (500)
    pairs = [(f"k{i}", 1000 + i) for i in range(1203)]

    progress.set(pairs, "embedding")

    found = progress.records([key for key, _ in pairs])
    assert [r.version if r else None for r in found] == [version for _, version in pairs]


def test_states_read_state_and_version_alone_in_order_with_none_for_missing(progress: Progress) -> None:
    progress.set([("a", 1)], "done")
    progress.set([("c", 2)], "writing")
    progress.name([("d", "alice", "gone", 3)])  # names alone: no record

    assert progress.states(["a", "b", "c", "a", "d"]) == [
        ("done", 1),
        None,
        ("writing", 2),
        ("done", 1),
        None,
    ]
    assert progress.states([]) == []


def test_states_of_more_documents_than_one_read_takes_match_their_records(progress: Progress) -> None:
    # Given more documents than one script call reads (1000), in two states
    pairs = [(f"k{i}", 1000 + i) for i in range(2345)]
    progress.set(pairs[:1500], "embedding")
    progress.set(pairs[1500:], "failed", "embed: refused")

    # Then a wait's read gives what the whole records say, page after page
    keys = [key for key, _ in pairs] + ["missing"]
    assert progress.states(keys) == [
        None if r is None else (r.state, r.version) for r in progress.records(keys)
    ]
    assert progress.states(keys)[-1] is None


def test_progress_expires_after_the_ttl(progress: Progress, client: fakeredis.FakeRedis) -> None:
    progress.set([("k", 1)], "queued")

    assert 0 < _ttl(client, "engram:doc:k") <= TTL_S


def test_named_records_say_whose_document_they_are_and_the_newest_come_first(
    client: fakeredis.FakeRedis, progress: Progress
) -> None:
    # Given three ingestions of two tenants, named by the producer, one later failed
    rows = [
        (document_key(user, doc), user, doc, version)
        for user, doc, version in [("alice", "a1", 10), ("bob", "b1", 11), ("alice", "a2", 12)]
    ]
    for key, _, _, version in rows:
        progress.set([(key, version)], "queued")
    progress.name(rows)
    progress.set([(rows[0][0], 10)], "failed", error="neo4j down")

    # Then each record carries its tenant and document id, and its failure survives the naming
    record = progress.get(rows[0][0])
    assert record is not None and (record.user_id, record.document_id, record.state) == (
        "alice",
        "a1",
        "failed",
    )
    assert record.error == "neo4j down"
    # And the newest ingestions come first, every tenant's or one tenant's alone
    assert [r.document_id for r in progress.recent(None)] == ["a2", "b1", "a1"]
    assert [r.document_id for r in progress.recent("alice", limit=1)] == ["a2"]
    assert [r.document_id for r in progress.recent("bob")] == ["b1"]
    # And the tenant's list of recent ingestions expires as the records do
    assert 0 < _ttl(client, "engram:recent:alice") <= TTL_S


def test_the_recent_lists_keep_only_the_newest(client: fakeredis.FakeRedis, progress: Progress) -> None:
    from shared.progress import RECENT_KEPT_A_TENANT

    rows = [(document_key("alice", f"d{i}"), "alice", f"d{i}", i) for i in range(RECENT_KEPT_A_TENANT + 5)]
    for key, _, _, version in rows:
        progress.set([(key, version)], "queued")
    progress.name(rows)

    assert client.zcard("engram:recent:alice") == RECENT_KEPT_A_TENANT
    assert progress.recent("alice", limit=1)[0].document_id == f"d{RECENT_KEPT_A_TENANT + 4}"


def test_a_record_of_names_alone_is_no_record(client: fakeredis.FakeRedis, progress: Progress) -> None:
    # Given a record expired between its state and its names (only the names were written)
    key = document_key("alice", "gone")
    progress.name([(key, "alice", "gone", 1)])

    # Then it reads as no record, not as a record without a state
    assert progress.get(key) is None
    assert progress.recent("alice") == []
