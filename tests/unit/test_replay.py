"""Replay re-drives failed documents from what is staged, and names what it cannot."""

from __future__ import annotations

from datetime import UTC, datetime

import fakeredis
import numpy as np

from shared.models import ChunkRecord, DocumentIn, StagedDocument
from shared.progress import Progress, ProgressRecord
from shared.services.refs import DocRef
from shared.services.replay import Replay, Stage
from shared.staging import Staging

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _staged(key: str, version: int) -> StagedDocument:
    chunk = ChunkRecord(id=f"{key}-0", chunk_index=0, content="text", content_hash="h", token_count=1)
    document = DocumentIn(user_id="alice", id=key, text="text")
    return StagedDocument(
        document=document, key=key, version=version, content_hash="h", received_at=NOW, chunks=[chunk]
    )


def _failed(batch: str | None, version: int = 3) -> ProgressRecord:
    return ProgressRecord(state="failed", version=version, error="neo4j down", updated_at=NOW, batch=batch)


def test_each_failed_document_reenters_the_stage_its_staging_allows() -> None:
    # Given batch b1 staged with vectors, b2 with chunks only, b3 gone, and one record without a batch
    client = fakeredis.FakeRedis()
    staging, progress = Staging(client, 3600), Progress(client, 3600)
    staging.put_documents("b1", [_staged("k1", 3)])
    staging.put_vector_slice("b1", 0, "m", np.ones((1, 4), dtype=np.float32))
    staging.put_documents("b2", [_staged("k2", 3)])
    for key, batch in (("k1", "b1"), ("k2", "b2"), ("k3", "b3")):
        progress.set([(key, 3)], "failed", "neo4j down", batch=batch)
    sent: list[tuple[Stage, str, list[DocRef]]] = []

    # When they are replayed
    failed = {"k1": _failed("b1"), "k2": _failed("b2"), "k3": _failed("b3"), "k4": _failed(None)}
    report = Replay(staging, progress, lambda stage, batch, docs: sent.append((stage, batch, docs))).run(
        failed
    )

    # Then b1 goes to write, b2 to embed, and k3 and k4 are named as not staged
    assert sorted(sent) == [("embed", "b2", [("k2", 3)]), ("write", "b1", [("k1", 3)])]
    assert (report.write, report.embed, sorted(report.not_staged)) == (1, 1, ["k3", "k4"])
    # And the re-driven records show them moving again, while the others stay failed
    states = {
        key: record.state
        for key, record in zip(["k1", "k2", "k3"], progress.records(["k1", "k2", "k3"]), strict=True)
        if record
    }
    assert states == {"k1": "writing", "k2": "embedding", "k3": "failed"}
