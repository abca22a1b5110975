"""Incremental ingestion against the real stack (issue 19): unchanged documents cost nothing,
an edited document re-embeds only its changed chunks, ``engram ingest --sync`` keeps a folder's
documents in step, and bad input loses nothing."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import neo4j
import pytest
from fastapi.testclient import TestClient

from shared.settings import Settings
from tests.integration.documents import ENGRAM, notes, paragraph
from tests.integration.support import ROOT, Workers, cypher, qdrant_reader, tenant_points, wait_until_finished

pytestmark = [pytest.mark.integration, pytest.mark.backup]


def post(api: TestClient, body: Any) -> dict[str, Any]:
    response = api.post("/api/documents", json=body)
    assert response.status_code == 202, response.text
    answer: dict[str, Any] = response.json()
    return answer


def status(api: TestClient, tenant: str, document_id: str) -> dict[str, Any]:
    response = api.get(f"/api/documents/{document_id}", params={"user_id": tenant})
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def stored(driver: neo4j.Driver, tenant: str) -> dict[str, dict[str, Any]]:
    """Per document id: its version and, per chunk, (content, updated_at, synced_at, embedding)."""
    rows = cypher(
        driver,
        """
        MATCH (d:Document {user_id: $u})
        OPTIONAL MATCH (d)-[:HAS_CHUNK]->(m:Memory)
        WITH d, m ORDER BY m.chunk_index
        RETURN d.external_id AS id, d.version AS version, d.source AS source,
               collect([m.content, toString(m.updated_at), toString(m.vector_synced_at)]) AS chunks,
               collect(m.embedding) AS vectors
        """,
        u=tenant,
    )
    return {row["id"]: row for row in rows}


def engram(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ENGRAM, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_an_unchanged_document_is_skipped_before_any_queue_work_and_force_redoes_it(
    api: TestClient, neo4j_driver: neo4j.Driver, workers: Workers, tenant: str
) -> None:
    # Given two documents ingested
    documents = [
        {"user_id": tenant, "id": "notes", "text": notes(8), "tags": ["home"]},
        {"user_id": tenant, "id": "short", "text": "Tomatoes need six hours of sun."},
    ]
    first = post(api, {"documents": documents})
    assert first["unchanged"] == [] and first["task_ids"]
    wait_until_finished(api, tenant, ["notes", "short"])
    before = stored(neo4j_driver, tenant)

    # When they are posted again as they are
    again = post(api, {"documents": documents})

    # Then nothing is enqueued and the answer and the status say unchanged, at the stored version
    assert again["unchanged"] == ["notes", "short"] and again["task_ids"] == []
    for document_id in ("notes", "short"):
        found = status(api, tenant, document_id)
        assert found["state"] == "unchanged"
        assert found["version"] == before[document_id]["version"]
    # And nothing was written: no new version, no chunk touched, no Qdrant sync
    time.sleep(1.0)
    assert stored(neo4j_driver, tenant) == before

    # When another tenant posts the same id and text, Then it is new for that tenant
    other = post(api, {"documents": [{**documents[1], "user_id": tenant + "-b"}]})
    assert other["unchanged"] == [] and other["task_ids"]
    wait_until_finished(api, tenant + "-b", ["short"])

    # When a document is posted again with force
    forced = post(api, {"documents": documents[:1], "force": True})

    # Then it is chunked, embedded (every chunk: no vector reused) and written at a new version
    assert forced["unchanged"] == [] and forced["task_ids"]
    done = wait_until_finished(api, tenant, ["notes"])["notes"]
    assert done["state"] == "done" and done["version"] == forced["version"]
    assert (done["chunks_embedded"], done["chunks_reused"]) == (done["chunks"], 0)
    after = stored(neo4j_driver, tenant)
    assert after["notes"]["version"] > before["notes"]["version"]
    assert [c[0] for c in after["notes"]["chunks"]] == [c[0] for c in before["notes"]["chunks"]]
    for new, old in zip(after["notes"]["vectors"], before["notes"]["vectors"], strict=True):
        assert new == pytest.approx(old, abs=1e-5)


def test_an_edited_paragraph_re_embeds_only_its_chunks_and_metadata_alone_embeds_nothing(
    api: TestClient, neo4j_driver: neo4j.Driver, workers: Workers, settings: Settings, tenant: str
) -> None:
    # Given a document of many chunks
    paragraphs = [paragraph(i) for i in range(24)]
    post(api, {"user_id": tenant, "id": "long", "text": "\n\n".join(paragraphs)})
    first = wait_until_finished(api, tenant, ["long"])["long"]
    assert first["chunks"] >= 8 and first["chunks_embedded"] == first["chunks"]
    before = stored(neo4j_driver, tenant)["long"]
    old_vectors = {c[0]: v for c, v in zip(before["chunks"], before["vectors"], strict=True)}

    # When one paragraph in the middle is edited
    paragraphs[12] = paragraph(12) + " The lantern by the orchard gate was mended on Tuesday."
    post(api, {"user_id": tenant, "id": "long", "text": "\n\n".join(paragraphs)})
    edited = wait_until_finished(api, tenant, ["long"])["long"]

    # Then at most two chunks went to the embedder; the others kept their stored vectors
    assert edited["state"] == "done"
    assert 1 <= edited["chunks_embedded"] <= 2
    assert edited["chunks_reused"] == edited["chunks"] - edited["chunks_embedded"]
    after = stored(neo4j_driver, tenant)["long"]
    reused = [
        (c[0], v) for c, v in zip(after["chunks"], after["vectors"], strict=True) if c[0] in old_vectors
    ]
    assert len(reused) == edited["chunks_reused"]
    assert all(v == pytest.approx(old_vectors[text], abs=1e-6) for text, v in reused)
    # And the new version is whole in both stores, and found by its new words
    assert edited["vector_sync"] == {"pending": 0, "synced": edited["chunks"], "failed": 0}
    found = api.post(
        "/api/memory/semantic-search",
        json={"user_id": tenant, "query": "when was the orchard gate lantern mended", "top_k": 1},
    ).json()
    assert "mended on Tuesday" in found["results"][0]["content"]

    # When only its metadata changes
    post(api, {"user_id": tenant, "id": "long", "text": "\n\n".join(paragraphs), "metadata": {"k": "v"}})
    relabelled = wait_until_finished(api, tenant, ["long"])["long"]

    # Then a new version is written and nothing is embedded
    assert relabelled["state"] == "done" and relabelled["version"] > edited["version"]
    assert (relabelled["chunks_embedded"], relabelled["chunks_reused"]) == (0, relabelled["chunks"])
    metadata = cypher(
        neo4j_driver, "MATCH (d:Document {user_id: $u, external_id: 'long'}) RETURN d.metadata AS m", u=tenant
    )
    assert json.loads(metadata[0]["m"]) == {"k": "v"}
    with qdrant_reader(workers, settings) as store:
        points = len(tenant_points(store, tenant))
    assert points == relabelled["chunks"]


def test_an_unchanged_post_never_hides_a_changed_one_still_on_its_way(
    api: TestClient, neo4j_driver: neo4j.Driver, workers: Workers, tenant: str
) -> None:
    # Given a document stored as A
    a = {"user_id": tenant, "id": "doc", "text": notes(3)}
    post(api, a)
    wait_until_finished(api, tenant, ["doc"])

    # When B is posted and, before it is written, A again (the same as what is stored)
    b = post(api, {**a, "text": notes(3, first=50)})
    back = post(api, a)

    # Then A is not taken as unchanged (B was accepted after it was stored), and A is what stays
    assert b["task_ids"] and back["unchanged"] == [] and back["version"] > b["version"]
    final = wait_until_finished(api, tenant, ["doc"])["doc"]
    assert final["state"] == "done" and final["version"] == back["version"]
    contents = [c[0] for c in stored(neo4j_driver, tenant)["doc"]["chunks"]]
    assert "\n\n".join(contents).startswith("Note 0:") and "Note 50:" not in " ".join(contents)


def test_engram_ingest_again_says_unchanged_and_force_redoes_it(
    workers: Workers, tmp_path: Path, tenant: str
) -> None:
    a, b = f"a-{tenant[-8:]}.md", f"b-{tenant[-8:]}.txt"  # titles unique in the store (test_integrity)
    (tmp_path / a).write_text(notes(4))
    (tmp_path / b).write_text(notes(2, first=10))
    first = engram("ingest", str(tmp_path), "--user", tenant, "--json")
    assert first.returncode == 0, first.stderr
    loaded = json.loads(first.stdout)
    assert loaded["enqueued"] == 2 and loaded["chunks_embedded"] == loaded["chunks"] > 0

    again = engram("ingest", str(tmp_path), "--user", tenant, "--json")
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["unchanged"] == [a, b] and report["enqueued"] == 0
    assert report["chunks_embedded"] == 0
    assert "2 unchanged" in again.stderr
    plain = engram("ingest", str(tmp_path), "--user", tenant)
    assert "enqueued 0 documents in 0 tasks; 2 unchanged" in plain.stdout

    forced = engram("ingest", str(tmp_path), "--user", tenant, "--force", "--json")
    assert forced.returncode == 0, forced.stderr
    redone = json.loads(forced.stdout)
    assert redone["enqueued"] == 2 and redone["chunks_embedded"] == loaded["chunks"]


def test_sync_adds_updates_and_forgets_only_its_own_folders_documents(
    api: TestClient,
    neo4j_driver: neo4j.Driver,
    workers: Workers,
    settings: Settings,
    tmp_path: Path,
    tenant: str,
) -> None:
    # Given a folder synced once for another tenant, when it held one file of that tenant's alone
    # (file names are unique per test: test_integrity makes Document titles unique in the store)
    u = tenant[-8:]
    keep, edit, gone, bad, new, other, theirs = (
        f"{name}-{u}.md" for name in ("keep", "edit", "gone", "bad", "new", "other", "theirs")
    )
    folder, elsewhere = tmp_path / "notes", tmp_path / "other"
    folder.mkdir()
    elsewhere.mkdir()
    (folder / theirs).write_text(notes(2, first=80))
    assert engram("ingest", str(folder), "--user", tenant + "-b", "--sync").returncode == 0
    (folder / theirs).unlink()
    others = stored(neo4j_driver, tenant + "-b")
    assert set(others) == {theirs}
    # And then for this tenant, with another folder's document and a webhook document beside it
    for name, seed in ((keep, 0), (edit, 10), (gone, 20), (bad, 30)):
        (folder / name).write_text(notes(3, first=seed))
    (elsewhere / other).write_text(notes(2, first=40))
    assert engram("ingest", str(folder), "--user", tenant, "--sync").returncode == 0
    assert engram("ingest", str(elsewhere), "--user", tenant, "--sync").returncode == 0
    post(api, {"user_id": tenant, "id": "webhook-note", "text": notes(1, first=60), "source": "n8n"})
    wait_until_finished(api, tenant, ["webhook-note"])
    before = stored(neo4j_driver, tenant)
    assert before[keep]["source"] == "folder:" + str(folder.resolve())
    assert set(before) == {keep, edit, gone, bad, other, "webhook-note"}

    # When one file is edited, one added, one deleted and one made unreadable
    edited = notes(3, first=10).replace("Note 11:", "Note 11: The kettle whistled twice.")
    (folder / edit).write_text(edited)
    (folder / new).write_text(notes(2, first=70))
    (folder / gone).unlink()
    (folder / bad).write_bytes("caf\xe9 au lait".encode("latin-1"))

    # Then a dry run lists exactly that and changes nothing
    dry = engram("ingest", str(folder), "--user", tenant, "--sync", "--dry-run", "--json")
    plan = json.loads(dry.stdout)
    assert dry.returncode == 1  # a file could not be read
    assert (plan["added"], plan["changed"], plan["forgotten"]) == ([new], [edit], [gone])
    assert plan["unchanged"] == 1 and [u["file"] for u in plan["unreadable"]] == [bad]
    assert stored(neo4j_driver, tenant) == before

    # When the sync runs
    run = engram("ingest", str(folder), "--user", tenant, "--sync", "--json")
    report = json.loads(run.stdout)

    # Then it embedded only the new and changed chunks, forgot the deleted file's document...
    assert run.returncode == 1 and bad in run.stderr
    assert (report["added"], report["changed"], report["forgotten"]) == ([new], [edit], [gone])
    after = stored(neo4j_driver, tenant)
    added = len(after[new]["chunks"])
    assert report["failed"] == 0 and added + 1 <= report["chunks_embedded"] <= added + 2
    assert set(after) == {keep, edit, new, bad, other, "webhook-note"}
    # ...and left the rest as it was: the unchanged file, the unreadable one, the other
    # folder's document and the webhook's
    for untouched in (keep, bad, other, "webhook-note"):
        assert after[untouched] == before[untouched], untouched
    assert after[edit]["version"] > before[edit]["version"]
    assert "kettle whistled twice" in " ".join(c[0] for c in after[edit]["chunks"])
    # And the other tenant's document of this folder, whose file is gone, is not forgotten
    assert stored(neo4j_driver, tenant + "-b") == others
    # And the forgotten document is gone from Qdrant too: its points are the tenant's memories
    memories = cypher(neo4j_driver, "MATCH (m:Memory {user_id: $u}) RETURN m.id AS id", u=tenant)
    with qdrant_reader(workers, settings) as store:
        points = len(tenant_points(store, tenant))
    assert points == len(memories)


def test_a_document_stored_before_fingerprints_existed_is_written_again_reusing_every_vector(
    api: TestClient, neo4j_driver: neo4j.Driver, workers: Workers, tenant: str
) -> None:
    # Given a document stored as one was before fingerprints existed: no fingerprint on it
    document = {"user_id": tenant, "id": "older", "text": notes(10)}
    post(api, document)
    first = wait_until_finished(api, tenant, ["older"])["older"]
    cypher(neo4j_driver, "MATCH (d:Document {user_id: $u}) REMOVE d.fingerprint", u=tenant)
    old = stored(neo4j_driver, tenant)["older"]

    # When it is posted again as it is
    again = post(api, document)

    # Then it cannot be known unchanged, so it is written again at a new version, but every chunk
    # takes its stored vector (the chunk texts match): nothing goes to the embedder
    assert again["unchanged"] == [] and again["task_ids"]
    done = wait_until_finished(api, tenant, ["older"])["older"]
    assert done["state"] == "done" and done["version"] > first["version"]
    assert (done["chunks_embedded"], done["chunks_reused"]) == (0, first["chunks"])
    new = stored(neo4j_driver, tenant)["older"]
    assert [c[0] for c in new["chunks"]] == [c[0] for c in old["chunks"]]
    for vector, was in zip(new["vectors"], old["vectors"], strict=True):
        assert vector == pytest.approx(was, abs=1e-6)
    # And now it carries its fingerprint: the next identical post is unchanged
    assert post(api, document)["unchanged"] == ["older"]
