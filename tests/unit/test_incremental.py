"""Incremental ingestion's pure parts: fingerprints, the unchanged check, reusing stored vectors
in the embed stage, the chunk counts on progress records, and a folder sync's plan."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path

import fakeredis
import numpy as np
import pytest

from producers.cli.folder_sync import folder_source, plan, read_folder, to_forget
from producers.cli.sync import sync
from shared.chunking import Chunker
from shared.errors import InvalidInput, ServiceUnavailable
from shared.ids import content_hash, document_key
from shared.models import DocumentIn
from shared.progress import Progress, ProgressRecord
from shared.services.embed import EmbedStage
from shared.services.incremental import classify
from shared.settings import Settings
from shared.staging import Staging
from shared.stores.neo4j_incremental import StoredState
from shared.tokenizer import load_tokenizer
from tests.unit.fakes import MODEL, FakeEmbedder, staged

TTL_S = 3600


@pytest.fixture
def client() -> Iterator[fakeredis.FakeRedis]:
    redis = fakeredis.FakeRedis()
    yield redis
    redis.close()


def _doc(**fields: object) -> DocumentIn:
    base: dict[str, object] = {"user_id": "alice", "id": "d", "text": "Tomatoes like sun."}
    return DocumentIn.model_validate({**base, **fields})


# Fingerprints


def test_a_fingerprint_survives_the_broker_and_changes_with_any_field() -> None:
    document = _doc(tags=["garden"], metadata={"n": 1, "x": "y"}, created_at=datetime(2024, 5, 1, tzinfo=UTC))
    # As the producer sends it (JSON, nulls left out) and the worker reads it back
    sent = json.loads(json.dumps(document.model_dump(mode="json", exclude_none=True)))
    assert DocumentIn.model_validate(sent).fingerprint() == document.fingerprint()
    for change in ({"text": "Tomatoes like shade."}, {"metadata": {"n": 2, "x": "y"}}, {"tags": []}):
        assert _doc(**{**document.model_dump(), **change}).fingerprint() != document.fingerprint()


# The unchanged check


def _stored(document: DocumentIn, version: int = 5, **over: object) -> StoredState:
    fields: dict[str, object] = {
        "version": version,
        "fingerprint": document.fingerprint(),
        "models": (MODEL,),
        "whole": True,
    }
    return StoredState(**{**fields, **over})  # type: ignore[arg-type]


def _record(state: str, version: int) -> ProgressRecord:
    return ProgressRecord(state=state, version=version, error=None, updated_at=datetime.now(UTC))  # type: ignore[arg-type]


def test_a_document_is_unchanged_only_when_stored_whole_as_given_by_the_model_and_nothing_newer_waits() -> (
    None
):
    document = _doc()
    assert classify(document, None, None, MODEL) == "new"
    assert classify(document, _stored(document), None, MODEL) == "unchanged"
    assert classify(document, _stored(document), _record("done", 5), MODEL) == "unchanged"
    # Text or metadata differ
    assert classify(_doc(metadata={"k": 1}), _stored(document), None, MODEL) == "changed"
    # A memory of it was deleted (a chunk short), or it is of another model
    assert classify(document, _stored(document, whole=False), None, MODEL) == "changed"
    assert classify(document, _stored(document, models=("old",)), None, MODEL) == "changed"
    assert classify(document, _stored(document, fingerprint=None), None, MODEL) == "changed"
    # A newer ingestion accepted (queued, or failed): the stored one may not be what was said last
    assert classify(document, _stored(document), _record("queued", 6), MODEL) == "changed"
    assert classify(document, _stored(document), _record("failed", 6), MODEL) == "changed"


# Reusing stored vectors


class StoredVectorsFake:
    def __init__(self, vectors: Mapping[tuple[str, str], list[float]], down: bool = False) -> None:
        self.vectors = dict(vectors)
        self.down = down
        self.asked: list[tuple[dict[str, set[str]], str]] = []

    def stored_vectors(
        self, wanted: Mapping[str, set[str]], model: str
    ) -> dict[tuple[str, str], list[float]]:
        self.asked.append((dict(wanted), model))
        if self.down:
            raise ServiceUnavailable("neo4j", "refused")
        return {k: v for k, v in self.vectors.items() if k[0] in wanted and k[1] in wanted[k[0]]}


def test_chunks_stored_with_the_same_text_take_their_vector_and_only_the_rest_is_embedded(
    client: fakeredis.FakeRedis,
) -> None:
    # Given a document of four chunks whose stored version holds two of them
    staging, progress = Staging(client, TTL_S), Progress(client, TTL_S)
    doc = staged("d", 7, ["alpha", "beta", "gamma", "delta"])
    staging.put_documents("b", [doc])
    progress.set([(doc.key, 7)], "embedding")
    kept = {
        (doc.key, content_hash("beta")): [0.0, 1.0, 0.0],
        (doc.key, content_hash("delta")): [0.0, 0.0, 1.0],
    }
    embedder = FakeEmbedder()

    # When the batch is embedded in slices of three
    result = EmbedStage(embedder, staging, progress, 3, StoredVectorsFake(kept)).run(
        "b", time.monotonic() + 60
    )

    # Then only the two new texts went to the embedder; the others carry the stored vectors
    assert (result.complete, result.embedded_now, result.reused) == (True, 2, 2)
    assert embedder.calls == [["alpha", "gamma"]]
    found = staging.vectors("b", 4)
    assert found is not None
    np.testing.assert_array_equal(found[1][1], [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(found[1][3], [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(found[1][0], FakeEmbedder().embed(["alpha", "gamma"])[0])
    # And the document's progress says so
    record = progress.get(doc.key)
    assert record is not None and (record.state, record.reused, record.embedded) == ("writing", 2, 2)


def test_a_document_whose_chunks_are_all_stored_embeds_nothing(client: fakeredis.FakeRedis) -> None:
    staging, progress = Staging(client, TTL_S), Progress(client, TTL_S)
    doc = staged("d", 7, ["alpha", "beta"])
    staging.put_documents("b", [doc])
    progress.set([(doc.key, 7)], "embedding")
    kept = {(doc.key, content_hash(t)): [1.0, 0.0, 0.0] for t in ("alpha", "beta")}
    embedder = FakeEmbedder()

    result = EmbedStage(embedder, staging, progress, 8, StoredVectorsFake(kept)).run(
        "b", time.monotonic() + 60
    )

    assert embedder.calls == [] and (result.embedded_now, result.reused) == (0, 2)
    assert staging.vectors("b", 2) is not None
    record = progress.get(doc.key)
    assert record is not None and (record.reused, record.embedded) == (2, 0)


def test_stored_vectors_out_of_reach_embed_everything(client: fakeredis.FakeRedis) -> None:
    staging, progress = Staging(client, TTL_S), Progress(client, TTL_S)
    doc = staged("d", 7, ["alpha", "beta"])
    staging.put_documents("b", [doc])
    store = StoredVectorsFake({(doc.key, content_hash("alpha")): [1.0, 0.0, 0.0]}, down=True)
    embedder = FakeEmbedder()

    result = EmbedStage(embedder, staging, progress, 8, store).run("b", time.monotonic() + 60)

    assert embedder.calls == [["alpha", "beta"]] and result.reused == 0


# Chunk counts on progress records


def test_chunk_counts_stay_with_their_version_and_a_newer_version_starts_without_them(
    client: fakeredis.FakeRedis,
) -> None:
    progress = Progress(client, TTL_S)
    key = document_key("alice", "d")
    progress.set([(key, 5)], "embedding")
    progress.set_counts([(key, 4, 9, 9)])  # an older version's counts: not this record's
    record = progress.get(key)
    assert record is not None and (record.reused, record.embedded) == (None, None)
    progress.set_counts([(key, 5, 3, 1)])
    progress.set([(key, 5)], "done")
    record = progress.get(key)
    assert record is not None and (record.state, record.reused, record.embedded) == ("done", 3, 1)
    progress.set([(key, 6)], "queued")
    record = progress.get(key)
    assert record is not None and (record.version, record.reused, record.embedded) == (6, None, None)


def test_unchanged_is_recorded_at_the_stored_version_and_never_hides_a_newer_ingestion(
    client: fakeredis.FakeRedis,
) -> None:
    progress = Progress(client, TTL_S)
    key = document_key("alice", "d")
    progress.set([(key, 5)], "done")
    progress.set([(key, 5)], "unchanged")
    record = progress.get(key)
    assert record is not None and (record.state, record.version) == ("unchanged", 5)
    progress.set([(key, 6)], "queued")
    progress.set([(key, 5)], "unchanged")  # a producer that read before version 6 was queued
    record = progress.get(key)
    assert record is not None and (record.state, record.version) == ("queued", 6)


# A folder sync's plan


def test_a_folder_read_records_its_source_and_keeps_what_it_cannot_read(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("Alpha notes.")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.md").write_text("Beta notes.")
    (tmp_path / "bad.txt").write_bytes("caf\xe9".encode("latin-1"))
    (tmp_path / "skip.bin").write_bytes(b"\x00")

    read = read_folder(tmp_path, "alice", {})

    assert [d.document_id for d in read.documents] == ["a.txt", "sub/b.md"]
    assert {d.source for d in read.documents} == {folder_source(tmp_path)}
    assert {d.user_id for d in read.documents} == {"alice"}
    assert [name for name, _ in read.unreadable] == ["bad.txt"] and read.kept == {"bad.txt"}
    assert not read.forget_nothing

    # Given what is stored from this folder: a.txt, bad.txt and gone.txt
    todo = plan(read, ["unchanged", "new"], ["a.txt", "bad.txt", "gone.txt"], force=False)
    assert [d.document_id for d in todo.unchanged] == ["a.txt"]
    assert [d.document_id for d in todo.added] == ["sub/b.md"]
    assert todo.forget == ["gone.txt"]  # bad.txt is unreadable now, not gone
    forced = plan(read, ["unchanged", "new"], [], force=True)
    assert [d.document_id for d in forced.changed] == ["a.txt"] and forced.unchanged == []


def test_an_unreadable_jsonl_file_or_one_naming_another_tenant_means_nothing_is_forgotten(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.txt").write_text("Alpha notes.")
    (tmp_path / "turns.jsonl").write_text('{"id": "t1", "text": "hi", "user_id": "bob"}\n')

    read = read_folder(tmp_path, "alice", {})

    assert [d.document_id for d in read.documents] == ["a.txt"]
    assert (read.forget_nothing and "bob" not in read.unreadable[0][1]) or read.forget_nothing
    assert plan(read, ["unchanged"], ["a.txt", "t1", "gone.txt"], force=False).forget == []


def test_a_sync_forgets_nothing_when_one_of_its_new_or_changed_documents_failed(tmp_path: Path) -> None:
    # Given a folder where a.txt was renamed b.txt: b new, a gone
    (tmp_path / "b.txt").write_text("Tomatoes need six hours of sun.")
    todo = plan(read_folder(tmp_path, "alice", {}), ["new"], ["a.txt"], force=False)
    assert todo.forget == ["a.txt"]

    # Then a is forgotten once b is done, and kept while b failed
    assert to_forget(todo, failed=0) == ["a.txt"]
    assert to_forget(todo, failed=1) == []


def test_a_sync_that_would_not_wait_for_its_documents_is_refused_before_anything_is_read(
    tmp_path: Path,
) -> None:
    # Given --sync asked with --no-wait (it would forget before the new documents are written)
    args = argparse.Namespace(paths=[tmp_path], user_id="alice", no_wait=True, json=False)

    # Then it is refused, naming why
    with pytest.raises(InvalidInput, match="forgets"):
        sync(args, {})


# Chunking by paragraph sections


@pytest.fixture(scope="module")
def chunkers() -> tuple[Chunker, Chunker]:
    settings = Settings(_env_file=None)
    tokenizer = load_tokenizer(settings)
    size, overlap = settings.chunk_size_tokens, settings.chunk_overlap_tokens
    return Chunker(tokenizer, size, overlap), Chunker(tokenizer, size, overlap, sections=True)


def _paragraph(seed: int) -> str:
    words = [
        "garden",
        "river",
        "stone",
        "quiet",
        "market",
        "winter",
        "letter",
        "morning",
        "bridge",
        "window",
        "paper",
        "lantern",
    ]
    sentences = [
        " ".join(words[(seed * 7 + s * 3 + w) % len(words)] for w in range(8 + (seed + s) % 9)).capitalize()
        + "."
        for s in range(4 + seed % 5)
    ]
    return f"Part {seed}. " + " ".join(sentences)


def test_a_text_without_blank_lines_is_chunked_as_before(chunkers: tuple[Chunker, Chunker]) -> None:
    whole, by_sections = chunkers
    text = " ".join(_paragraph(i) for i in range(30))
    assert by_sections.chunk(text) == whole.chunk(text)


def test_editing_one_paragraph_rechunks_only_around_it(chunkers: tuple[Chunker, Chunker]) -> None:
    _, by_sections = chunkers
    paragraphs = [_paragraph(i) for i in range(40)]
    before = {c.text for c in by_sections.chunk("\n\n".join(paragraphs))}
    worst = 0
    for edited in range(0, 40, 4):
        changed = list(paragraphs)
        changed[edited] += " A sentence added here."
        after = [c.text for c in by_sections.chunk("\n\n".join(changed))]
        worst = max(worst, len([text for text in after if text not in before]))
        # Every paragraph's words are still in some chunk, in order
        assert all(any(p[:40] in text for text in after) for p in changed)
    assert len(before) >= 10 and worst <= 3
