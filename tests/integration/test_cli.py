"""The ``engram`` command as a person runs it: a folder in, progress out, searches answered."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.support import ROOT, Workers

pytestmark = pytest.mark.integration
ENGRAM = str(Path(sys.executable).with_name("engram"))


def engram(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ENGRAM, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ingest_a_folder_and_jsonl_then_search_and_status(
    workers: Workers, tmp_path: Path, tenant: str
) -> None:
    # Given a folder with a text file, a Markdown file and a JSONL file of conversation turns
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "garden.txt").write_text(
        "Tomatoes need six hours of direct sun and deep, rare watering."
    )
    (tmp_path / "notes" / "bike.md").write_text(
        "# Bike\nA chain wears out after about 3000 km and stretches the cassette."
    )
    (tmp_path / "notes" / "chat.jsonl").write_text(
        '{"_id": "turn-1", "text": "I am allergic to peanuts, remember that.", "session_id": "s1", "memory_type": "conversation"}\n'
    )

    # When it is ingested through the queues
    ingest = engram("ingest", str(tmp_path / "notes"), "--user", tenant, "--project", "home")

    # Then the load reports every document done, with throughput
    assert ingest.returncode == 0, ingest.stderr
    assert "enqueued 3 documents" in ingest.stdout
    assert "ingested 3 documents" in ingest.stdout and "failed: 0" in ingest.stdout

    # And a search by meaning finds the conversation turn
    found = engram("search", "what food can't I eat", "--user", tenant, "--top-k", "1")
    assert found.returncode == 0, found.stderr
    assert "[turn-1#0]" in found.stdout and "peanuts" in found.stdout

    # And the status of a document is known, all synced
    status = engram("status", "garden.txt", "--user", tenant)
    assert status.returncode == 0, status.stderr
    assert '"state": "done"' in status.stdout and '"synced": 1' in status.stdout


def test_a_non_utf8_file_stops_the_load_naming_it_and_enqueues_nothing(
    workers: Workers, tmp_path: Path, tenant: str
) -> None:
    (tmp_path / "ok.txt").write_text("This one is fine.")
    (tmp_path / "bad.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))

    result = engram("ingest", str(tmp_path), "--user", tenant)

    assert result.returncode == 2
    assert "bad.txt" in result.stderr and "UTF-8" in result.stderr
    status = engram("status", "ok.txt", "--user", tenant)
    assert status.returncode == 1 and '"state": "unknown"' in status.stdout


def test_reconcile_dry_run_reports_without_changing(workers: Workers) -> None:
    result = engram("reconcile", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert '"dry_run": true' in result.stdout and '"resynced": 0' in result.stdout
