"""The chunk, embed and write stages over fakeredis Staging/Progress and the store fakes."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

import fakeredis
import numpy as np
import pytest
from pydantic import ValidationError

from shared.chunking import Chunker
from shared.embedding.base import Vectors
from shared.errors import EmbeddingRejected, StagingMissing
from shared.ids import document_key
from shared.models import DocumentIn
from shared.progress import Progress
from shared.services.chunk import Accepted, ChunkStage
from shared.services.embed import EmbedStage
from shared.services.sync import Syncer
from shared.services.write import WriteStage
from shared.settings import Settings
from shared.staging import Staging
from shared.tokenizer import load_tokenizer
from tests.unit.fakes import DIM, MODEL, Clock, FakeEmbedder, FakeGraph, FakeVectorSpace, staged

TTL_S = 3600


@pytest.fixture
def client() -> Iterator[fakeredis.FakeRedis]:
    redis = fakeredis.FakeRedis()
    yield redis
    redis.close()


@pytest.fixture
def staging(client: fakeredis.FakeRedis) -> Staging:
    return Staging(client, TTL_S)


@pytest.fixture
def progress(client: fakeredis.FakeRedis) -> Progress:
    return Progress(client, TTL_S)


@pytest.fixture(scope="module")
def chunker() -> Chunker:
    settings = Settings(_env_file=None)
    s = settings
    return Chunker(load_tokenizer(s), s.chunk_size_tokens, s.chunk_overlap_tokens, s.chunk_sections)


def _accepted(document_id: str, text: str, version: int = 10) -> Accepted:
    return Accepted(DocumentIn(user_id="alice", id=document_id, text=text), version)


def _unchecked(document_id: str, text: str, version: int = 10) -> Accepted:
    """A document that reached the stage without the edge's check (a message queued by an older
    producer, say): the stage must still fail it alone."""
    return Accepted(DocumentIn.model_construct(user_id="alice", id=document_id, text=text), version)


# ChunkStage


@pytest.mark.parametrize("unreadable", ["\ufffd", "\ufffd\ufffd \ufffd", "\u0301"])
def test_the_chunker_reduces_some_text_to_nothing_and_the_edge_refuses_it(
    chunker: Chunker, unreadable: str
) -> None:
    # The premise of the tests below: the model sees nothing in these, and the edge refuses them
    assert chunker.chunk(unreadable) == []
    with pytest.raises(ValidationError, match="nothing to read"):
        DocumentIn(user_id="alice", text=unreadable)


@pytest.mark.parametrize("unreadable", ["\ufffd", "\u0301"])
def test_a_document_the_tokenizer_reduces_to_nothing_fails_alone(
    chunker: Chunker, staging: Staging, progress: Progress, unreadable: str
) -> None:
    # Given a batch with one document the model cannot read among readable ones
    batch = [
        _accepted("a", "The first document is fine."),
        _unchecked("bad", unreadable),
        _accepted("c", "So is the third one."),
    ]
    stage = ChunkStage(chunker, staging, progress)

    # When it is chunked
    result = stage.run("batch-1", batch)

    # Then only that document failed, with its reason; the rest are staged for embedding
    bad_ref = batch[1].ref
    assert result.failed == [bad_ref]
    assert result.staged == [batch[0].ref, batch[2].ref]
    assert result.chunks == 2
    documents = staging.documents("batch-1")
    assert documents is not None
    assert [d.document.document_id for d in documents] == ["a", "c"]
    assert [d.version for d in documents] == [10, 10]
    failed = progress.get(bad_ref[0])
    assert failed is not None
    assert (failed.state, failed.version) == ("failed", 10)
    assert failed.error is not None and failed.error.startswith("chunk: ")
    assert "no text the model can read" in failed.error
    for ref in result.staged:
        record = progress.get(ref[0])
        assert record is not None and (record.state, record.version) == ("embedding", 10)


def test_a_batch_of_only_unreadable_documents_stages_nothing(
    chunker: Chunker, staging: Staging, progress: Progress
) -> None:
    result = ChunkStage(chunker, staging, progress).run("b", [_unchecked("bad", "\ufffd")])

    assert (result.staged, result.chunks) == ([], 0)
    assert staging.documents("b") is None


def test_chunks_get_stable_ids_and_the_document_its_key(
    chunker: Chunker, staging: Staging, progress: Progress
) -> None:
    accepted = _accepted("long", " ".join(f"Sentence number {i} is here." for i in range(300)))

    first = ChunkStage(chunker, staging, progress).stage_document(accepted)
    again = ChunkStage(chunker, staging, progress).stage_document(accepted)

    assert first.key == document_key("alice", "long")
    assert len(first.chunks) > 1
    assert [c.id for c in first.chunks] == [c.id for c in again.chunks]
    assert [c.chunk_index for c in first.chunks] == list(range(len(first.chunks)))


# EmbedStage


def _stage_batch(staging: Staging, chunks: int) -> None:
    docs = [
        staged("d1", 5, [f"one-{i}" for i in range(3)]),
        staged("d2", 5, [f"two-{i}" for i in range(chunks - 3)]),
    ]
    staging.put_documents("b", docs)


def test_embed_stops_at_a_passed_deadline_and_resumes_only_the_rest(
    staging: Staging, progress: Progress
) -> None:
    # Given a staged batch of 5 chunks, embedded 2 per slice
    _stage_batch(staging, 5)
    embedder = FakeEmbedder()
    stage = EmbedStage(embedder, staging, progress, slice_size=2)

    # When a run's deadline has already passed after its first slice
    first = stage.run("b", deadline=time.monotonic() - 1)

    # Then it embeds that one slice and says it is not complete
    assert (first.complete, first.chunks, first.embedded_now) == (False, 5, 2)
    assert embedder.calls == [["one-0", "one-1"]]
    assert staging.vectors("b", 5) is None
    assert progress.get(document_key("alice", "d1")) is None

    # and when a second run has time
    second = stage.run("b", deadline=time.monotonic() + 60)

    # Then it embeds only the remaining slices, and the batch's vectors are whole and in order
    assert (second.complete, second.embedded_now) == (True, 3)
    assert embedder.calls[1:] == [["one-2", "two-0"], ["two-1"]]
    found = staging.vectors("b", 5)
    assert found is not None
    model, vectors = found
    assert model == MODEL
    slices = [["one-0", "one-1"], ["one-2", "two-0"], ["two-1"]]
    np.testing.assert_array_equal(vectors, np.concatenate([FakeEmbedder().embed(s) for s in slices]))
    record = progress.get(document_key("alice", "d2"))
    assert record is not None and (record.state, record.version) == ("writing", 5)


def test_a_retried_embed_takes_smaller_slices_and_keeps_what_was_staged(
    staging: Staging, progress: Progress
) -> None:
    # Given a batch of 10 chunks whose first try staged one slice of 4, then ran out of time
    # (on a loaded machine one slice can outlast the soft time limit, every try alike)
    _stage_batch(staging, 10)
    embedder = FakeEmbedder()
    stage = EmbedStage(embedder, staging, progress, slice_size=4)
    assert not stage.run("b", deadline=time.monotonic() - 1).complete

    # When the task is retried (its first retry halves the slice, its second quarters it)
    result = stage.run("b", deadline=time.monotonic() + 60, retries=1)

    # Then only the rest is embedded, in slices of 2, and the batch's vectors are whole and in order
    assert (result.complete, result.embedded_now) == (True, 6)
    texts = ["one-0", "one-1", "one-2"] + [f"two-{i}" for i in range(7)]
    assert embedder.calls[1:] == [texts[4:6], texts[6:8], texts[8:10]]
    found = staging.vectors("b", 10)
    assert found is not None
    slices = [texts[0:4], texts[4:6], texts[6:8], texts[8:10]]
    np.testing.assert_array_equal(found[1], np.concatenate([FakeEmbedder().embed(s) for s in slices]))


def test_embed_fills_the_gaps_between_slices_staged_by_other_tries(
    staging: Staging, progress: Progress
) -> None:
    # Given a batch of 10 chunks of which another try staged chunks 4 and 5 alone
    _stage_batch(staging, 10)
    texts = ["one-0", "one-1", "one-2"] + [f"two-{i}" for i in range(7)]
    staging.put_vector_slice("b", 4, MODEL, FakeEmbedder().embed(texts[4:6]))
    embedder = FakeEmbedder()

    # When a try with slices of 3 runs
    result = EmbedStage(embedder, staging, progress, slice_size=3).run("b", time.monotonic() + 60)

    # Then it embeds around that slice, never across it, and the vectors are whole and in order
    assert (result.complete, result.embedded_now) == (True, 8)
    assert embedder.calls == [texts[0:3], texts[3:4], texts[6:9], texts[9:10]]
    found = staging.vectors("b", 10)
    assert found is not None
    slices = [texts[0:3], texts[3:4], texts[4:6], texts[6:9], texts[9:10]]
    np.testing.assert_array_equal(found[1], np.concatenate([FakeEmbedder().embed(s) for s in slices]))


class SlowEmbedder(FakeEmbedder):
    """Each call takes ``seconds`` on a clock the test reads (a loaded machine, say)."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.now = 0.0
        self.seconds = seconds

    def clock(self) -> float:
        return self.now

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.now += self.seconds
        return super().embed(texts)


def test_embed_does_not_start_a_slice_it_would_not_finish_before_the_deadline(
    staging: Staging, progress: Progress
) -> None:
    # Given a batch of 6 chunks, 2 per slice, on a machine where a slice takes 10 s
    # (a slice past the deadline may meet the soft time limit, and its work is lost)
    _stage_batch(staging, 6)
    embedder = SlowEmbedder(seconds=10.0)
    stage = EmbedStage(embedder, staging, progress, slice_size=2, clock=embedder.clock)

    # When a run has 15 s before its deadline
    result = stage.run("b", deadline=15.0)

    # Then it stages one slice and stops, rather than start one that would end at 20 s
    assert (result.complete, result.embedded_now) == (False, 2)
    assert embedder.calls == [["one-0", "one-1"]]

    # and the next run (a new task, a new deadline) takes the rest
    again = stage.run("b", deadline=embedder.now + 60.0)
    assert (again.complete, again.embedded_now) == (True, 4)


def test_embed_run_on_a_fully_embedded_batch_calls_the_model_no_more(
    staging: Staging, progress: Progress
) -> None:
    _stage_batch(staging, 4)
    embedder = FakeEmbedder()
    stage = EmbedStage(embedder, staging, progress, slice_size=3)
    stage.run("b", deadline=time.monotonic() + 60)

    again = stage.run("b", deadline=time.monotonic() + 60)

    assert (again.complete, again.embedded_now) == (True, 0)
    assert len(embedder.calls) == 2


def test_embed_of_a_batch_with_nothing_staged_is_staging_missing(
    staging: Staging, progress: Progress
) -> None:
    with pytest.raises(StagingMissing):
        EmbedStage(FakeEmbedder(), staging, progress, slice_size=2).run("gone", time.monotonic() + 60)


def test_embed_of_a_batch_already_written_is_a_redelivery_ignored(
    staging: Staging, progress: Progress
) -> None:
    # Given a batch written and finished (its staging dropped)
    staging.put_documents("b", [])
    staging.finish("b")
    embedder = FakeEmbedder()

    # When its embed message comes again
    result = EmbedStage(embedder, staging, progress, slice_size=2).run("b", time.monotonic() + 60)

    # Then nothing is embedded and nothing is to be sent on
    assert result.already_written is True
    assert embedder.calls == []


# WriteStage


class Pipeline:
    def __init__(self, staging: Staging, progress: Progress) -> None:
        self.clock = Clock()
        self.graph = FakeGraph(self.clock)
        self.space = FakeVectorSpace()
        self.staging = staging
        self.progress = progress
        self.stage = WriteStage(self.graph, Syncer(self.graph, self.space, self.clock), staging, progress)

    def stage_batch(self, batch_id: str, *docs_: tuple[str, int, list[str]]) -> list[tuple[str, int]]:
        docs = [staged(name, version, texts) for name, version, texts in docs_]
        self.staging.put_documents(batch_id, docs)
        chunks = sum(len(d.chunks) for d in docs)
        vectors = np.ones((chunks, DIM), dtype=np.float32) / np.sqrt(DIM)
        self.staging.put_vector_slice(batch_id, 0, MODEL, vectors)
        refs = [(d.key, d.version) for d in docs]
        self.progress.set(refs, "writing")
        return refs


@pytest.fixture
def pipeline(staging: Staging, progress: Progress) -> Pipeline:
    return Pipeline(staging, progress)


def test_a_document_neo4j_refuses_fails_alone(pipeline: Pipeline) -> None:
    # Given a batch of three documents, one of which Neo4j refuses
    refs = pipeline.stage_batch("b", ("a", 3, ["a1", "a2"]), ("bad", 3, ["x"]), ("c", 3, ["c1"]))
    bad_key = refs[1][0]
    pipeline.graph.refuse = {bad_key}

    # When the batch is written
    report = pipeline.stage.run("b")

    # Then the others are written and synced, and only that one is recorded failed
    assert (report.written, report.failed, report.memories) == (2, 1, 3)
    assert report.sync.synced == 3
    assert set(pipeline.graph.documents) == {refs[0][0], refs[2][0]}
    assert len(pipeline.space(MODEL, DIM).points) == 3
    states = pipeline.progress.records([key for key, _ in refs])
    assert [(r.state, r.version) if r else None for r in states] == [("done", 3), ("failed", 3), ("done", 3)]
    failed = states[1]
    assert failed is not None and failed.error is not None
    assert failed.error.startswith("write: ") and "refused" in failed.error
    assert pipeline.staging.is_finished("b")


def test_a_batch_neo4j_takes_is_written_in_one_call(pipeline: Pipeline) -> None:
    pipeline.stage_batch("b", ("a", 3, ["a1"]), ("c", 3, ["c1"]))

    report = pipeline.stage.run("b")

    assert (report.written, report.failed) == (2, 0)
    assert len(pipeline.graph.write_calls) == 1


def test_a_single_document_batch_neo4j_refuses_is_recorded_failed(pipeline: Pipeline) -> None:
    refs = pipeline.stage_batch("b", ("bad", 3, ["x"]))
    pipeline.graph.refuse = {refs[0][0]}

    report = pipeline.stage.run("b")

    assert (report.written, report.failed) == (0, 1)
    record = pipeline.progress.get(refs[0][0])
    assert record is not None and record.state == "failed"


def test_a_stale_document_is_done_and_does_not_overwrite_the_newer_one(pipeline: Pipeline) -> None:
    # Given version 9 of a document already written
    pipeline.stage_batch("new", ("a", 9, ["nine"]))
    pipeline.stage.run("new")

    # When a batch carrying version 4 of it is written late
    refs = pipeline.stage_batch("old", ("a", 4, ["four"]))
    report = pipeline.stage.run("old")

    # Then it is counted stale; the store and the progress record still speak of version 9
    assert (report.written, report.stale) == (0, 1)
    assert set(pipeline.graph.versions_of(refs[0][0]).values()) == {9}
    record = pipeline.progress.get(refs[0][0])
    assert record is not None and (record.state, record.version) == ("done", 9)


def test_a_redelivered_write_of_a_finished_batch_is_ignored(pipeline: Pipeline) -> None:
    pipeline.stage_batch("b", ("a", 3, ["a1"]))
    pipeline.stage.run("b")

    again = pipeline.stage.run("b")

    assert again.already_written is True
    assert len(pipeline.graph.write_calls) == 1


def test_a_write_with_vectors_missing_is_staging_missing(pipeline: Pipeline) -> None:
    pipeline.staging.put_documents("b", [staged("a", 3, ["a1", "a2"])])
    pipeline.staging.put_vector_slice("b", 0, MODEL, np.ones((1, DIM), dtype=np.float32))

    with pytest.raises(StagingMissing):
        pipeline.stage.run("b")


class RefusingEmbedder(FakeEmbedder):
    """Refuses any call holding a text it does not take, as an HTTP backend's 4xx would."""

    def __init__(self, refused: str) -> None:
        super().__init__()
        self.refused = refused

    def embed(self, texts: Sequence[str]) -> Vectors:
        if self.refused in texts:
            raise EmbeddingRejected(f"HTTP 400: input {self.refused!r} refused")
        return super().embed(texts)


def test_a_text_the_embedder_refuses_fails_its_document_alone(staging: Staging, progress: Progress) -> None:
    # Given a batch of three documents, one holding a text the embedder refuses
    docs = [staged("a", 3, ["a1", "a2"]), staged("bad", 3, ["poison"]), staged("c", 3, ["c1"])]
    staging.put_documents("b", docs)
    embedder = RefusingEmbedder("poison")

    # When the batch is embedded, then written
    result = EmbedStage(embedder, staging, progress, slice_size=8).run("b", time.monotonic() + 60)
    clock = Clock()
    graph, space = FakeGraph(clock), FakeVectorSpace()
    report = WriteStage(graph, Syncer(graph, space, clock), staging, progress).run("b")

    # Then the others are embedded, written and synced; only that one is recorded failed, and not written
    assert result.complete and result.chunks == 4
    assert (report.written, report.memories, report.sync.synced) == (2, 3, 3)
    assert set(graph.documents) == {docs[0].key, docs[2].key}
    records = progress.records([d.key for d in docs])
    assert [r.state if r else None for r in records] == ["done", "failed", "done"]
    assert records[1] is not None and records[1].error is not None and "poison" in records[1].error


class BusyEmbedder(FakeEmbedder):
    """Spends ``cpu_s`` of this process's CPU in each call, as a model does."""

    def __init__(self, cpu_s: float) -> None:
        super().__init__()
        self._cpu_s = cpu_s

    def embed(self, texts: Sequence[str]) -> Vectors:
        until = time.process_time() + self._cpu_s
        while time.process_time() < until:
            pass
        return super().embed(texts)


def test_the_embed_stage_reports_the_cpu_its_model_calls_took(staging: Staging, progress: Progress) -> None:
    # Given a batch of 6 chunks embedded in 3 slices, each model call 40 CPU-ms
    _stage_batch(staging, 6)
    stage = EmbedStage(BusyEmbedder(0.04), staging, progress, slice_size=2)

    # When it is embedded, the stage's own work around the model timed beside it
    began = time.process_time()
    result = stage.run("b", time.monotonic() + 60)
    spent = time.process_time() - began

    # Then the report holds the three calls' CPU, and not the stage's work around them
    assert result.complete
    assert 0.12 <= result.model_cpu_s <= spent
    assert spent - result.model_cpu_s > 0
