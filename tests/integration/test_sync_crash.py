"""A crash in the middle of ``engram ingest DIR --sync`` (issue 19, part 4), caused for real: the
command is SIGKILLed once it has enqueued its work, and the write worker is SIGKILLed as it writes.
Every document stays at its old or its new version in both stores, none goes missing, and running
the sync again finishes the job with the stores in parity."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import neo4j
import pytest

from producers.client import EngramClient
from shared.settings import Settings
from tests.integration.documents import ENGRAM, notes
from tests.integration.support import ROOT, Workers, cypher, qdrant_reader, tenant_points

pytestmark = [pytest.mark.integration, pytest.mark.backup]
NO_DRIFT = {"missing_in_qdrant": 0, "stale_in_qdrant": 0, "orphan_points": 0}
# A document as a reader sees it: its chunks' texts in order and whether all of them are there;
# absent when the tenant has no such document.
State = tuple[tuple[str, ...], bool] | None


def snapshot(driver: neo4j.Driver, tenant: str) -> dict[str, State]:
    rows = cypher(
        driver,
        """
        MATCH (d:Document {user_id: $u})
        OPTIONAL MATCH (d)-[:HAS_CHUNK]->(m:Memory)
        WITH d, m ORDER BY m.chunk_index
        RETURN d.external_id AS id, d.chunk_count AS expected, collect(m.content) AS chunks
        """,
        u=tenant,
    )
    return {row["id"]: (tuple(row["chunks"]), len(row["chunks"]) == row["expected"]) for row in rows}


def qdrant_documents(workers: Workers, settings: Settings, tenant: str) -> dict[str, set[tuple[str, int]]]:
    """Per document id, the (memory id, version) of its points."""
    found: dict[str, set[tuple[str, int]]] = {}
    with qdrant_reader(workers, settings) as store:
        points = tenant_points(store, tenant)
    for point in points.values():
        found.setdefault(str(point.payload["document_id"]), set()).add((point.id, point.version))
    return found


def neo4j_documents(driver: neo4j.Driver, tenant: str) -> dict[str, set[tuple[str, int]]]:
    rows = cypher(
        driver,
        "MATCH (m:Memory {user_id: $u}) RETURN m.document_id AS d, m.id AS id, m.version AS v",
        u=tenant,
    )
    found: dict[str, set[tuple[str, int]]] = {}
    for row in rows:
        found.setdefault(str(row["d"]), set()).add((str(row["id"]), int(row["v"])))
    return found


def wait_for(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s} s"
        time.sleep(0.3)


def test_a_sync_killed_mid_run_leaves_each_document_old_or_new_and_a_second_sync_finishes_it(
    neo4j_driver: neo4j.Driver, workers: Workers, settings: Settings, tmp_path: Path, tenant: str
) -> None:
    # Given a folder of 24 notes synced (file names unique per test: titles are unique in the store)
    u = tenant[-8:]
    folder = tmp_path / "notes"
    folder.mkdir()
    names = [f"n{i:02d}-{u}.md" for i in range(24)]
    for i, name in enumerate(names):
        (folder / name).write_text(notes(3, first=i * 3))
    first = subprocess.run(
        [ENGRAM, "ingest", str(folder), "--user", tenant, "--sync"],
        cwd=ROOT,
        capture_output=True,
        timeout=300,
    )
    assert first.returncode == 0, first.stderr
    before = snapshot(neo4j_driver, tenant)
    assert len(before) == 24 and all(whole for _, whole in filter(None, before.values()))

    # And then 8 of them edited, 8 deleted and 8 new ones added
    for name in names[:8]:
        (folder / name).write_text((folder / name).read_text() + "\n\nThe kettle whistled twice at noon.")
    for name in names[8:16]:
        (folder / name).unlink()
    added = [f"new{i:02d}-{u}.md" for i in range(8)]
    for i, name in enumerate(added):
        (folder / name).write_text(notes(2, first=200 + i * 2))

    # When the sync is SIGKILLed as soon as it has enqueued the new and changed documents
    said = []
    with subprocess.Popen(
        [ENGRAM, "ingest", str(folder), "--user", tenant, "--sync"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as run:
        assert run.stdout is not None
        for line in run.stdout:
            said.append(line)
            if line.startswith("enqueued"):
                run.send_signal(signal.SIGKILL)
                break
        run.wait(timeout=60)
    assert run.returncode == -signal.SIGKILL, "".join(said)
    assert "8 new, 8 changed" in "".join(said)

    # And the write worker is SIGKILLed once the first new version is in Neo4j, then started again
    # (its unacknowledged task comes back after the visibility timeout)
    seen = [snapshot(neo4j_driver, tenant)]
    wait_for(lambda: seen.append(snapshot(neo4j_driver, tenant)) or seen[-1] != before, 240, "a first write")
    workers.kill("write")
    seen.append(snapshot(neo4j_driver, tenant))
    workers.start("write")

    # Then, while the work still queued goes on, every document a reader sees is whole, at its
    # old or new text (checked below against the finished sync), and none is missing
    def settled() -> bool:
        seen.append(snapshot(neo4j_driver, tenant))
        pending = cypher(
            neo4j_driver,
            "MATCH (m:Memory {user_id: $u}) WHERE m.vector_sync <> 'synced' RETURN count(m) AS n",
            u=tenant,
        )[0]["n"]
        return len([d for d in seen[-1] if d.startswith("new")]) == 8 and pending == 0

    wait_for(settled, 300, "the enqueued work done and synced")
    in_between = dict(seen[-1])
    assert all(state is not None and state[1] for state in in_between.values())
    # And nothing was forgotten yet: the crash came before the forgets
    assert set(in_between) == set(before) | set(added)
    # And Qdrant holds each document at the version Neo4j does, every chunk of it
    assert qdrant_documents(workers, settings, tenant) == neo4j_documents(neo4j_driver, tenant)

    # When the sync runs again
    again = subprocess.run(
        [ENGRAM, "ingest", str(folder), "--user", tenant, "--sync", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )

    # Then it finds the new and changed documents done, and forgets the deleted files' documents
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert (report["added"], report["changed"]) == ([], [])
    assert sorted(report["forgotten"]) == sorted(names[8:16])
    after = snapshot(neo4j_driver, tenant)
    assert set(after) == set(names[:8]) | set(names[16:]) | set(added)
    # And every state a reader saw on the way was the old or the new one of its document
    for state in seen:
        for document_id, held in state.items():
            assert held in (before.get(document_id), after.get(document_id)), document_id
            assert held is not None and held[1], document_id
        assert set(before) - set(names[8:16]) <= set(state), "a kept or edited document went missing"
    assert all(after[name] != before[name] for name in names[:8])
    assert all(after[name] == before[name] for name in names[16:])
    # And the stores are in parity: the same memories at the same versions, no drift
    assert qdrant_documents(workers, settings, tenant) == neo4j_documents(neo4j_driver, tenant)
    client = EngramClient(settings)
    try:
        assert client.reconcile(dry_run=True, timeout_s=120)["drift_found"] == NO_DRIFT
    finally:
        client.close()
