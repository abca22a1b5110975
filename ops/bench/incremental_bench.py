"""Incremental ingestion's figures (issue 19), on a running stack (ops/demo's, or any ENGRAM_* names).

    .venv/bin/python ops/bench/incremental_bench.py                 # the issue's sizes
    .venv/bin/python ops/bench/incremental_bench.py --documents 500 --edited 20 --notes 200

Three measurements, each in a tenant of its own (``bench-incr-<time>-...``, forgotten at the end
unless ``--keep``), texts from ../shared/datasets/msmarco-5k (real passages):

1. ``--documents`` passages ingested through the queues, then the same again: chunks embedded by
   each, and how much faster the second (unchanged) run ended;
2. ``--edited`` documents of about twenty chunks (paragraphs of passages), ingested, then each with
   one paragraph edited and ingested again: chunks embedded per document (mean and max);
3. a folder of ``--notes`` notes synced with ``engram ingest DIR --sync``, then 1% changed, 0.5%
   added and 0.5% deleted and synced again: documents added, changed and forgotten, chunks
   embedded, and a reconcile dry run's drift afterwards.

Prints one JSON object (and progress on stderr).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from producers.client import EngramClient
from shared.errors import SearchTimeout
from shared.ids import document_key
from shared.models import DocumentIn, SearchFilters

ROOT = Path(__file__).resolve().parents[2]
ENGRAM = str(Path(sys.executable).with_name("engram"))
CORPUS = ROOT.parent / "shared" / "datasets" / "msmarco-5k" / "corpus.jsonl"
EDIT = " This paragraph was edited for the benchmark, one sentence added at its end."


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def passages(limit: int) -> list[str]:
    found = []
    with CORPUS.open() as corpus:
        for line in corpus:
            text = " ".join(json.loads(line)["text"].split())
            if text:
                found.append(text)
            if len(found) >= limit:
                break
    return found


def ingest(client: EngramClient, documents: Sequence[DocumentIn], timeout_s: float = 3600) -> dict[str, Any]:
    """Ingests through the queues and waits; the seconds, and chunks embedded and reused."""
    started = time.monotonic()
    accepted = client.ingest(documents)
    skipped = set(accepted.unchanged)
    refs = [
        (document_key(d.user_id, d.document_id), accepted.version)
        for d in documents
        if d.document_id not in skipped
    ]
    while refs:
        states = client.states(refs)
        if states["done"] + states["failed"] + states["unchanged"] == len(refs):
            break
        if time.monotonic() - started > timeout_s:
            raise SearchTimeout(f"not finished after {timeout_s:g} s: {dict(states)}")
        time.sleep(0.5)
    seconds = time.monotonic() - started
    reused, embedded = client.chunk_work(refs) if refs else (0, 0)
    return {
        "seconds": round(seconds, 2),
        "enqueued": len(refs),
        "unchanged": len(skipped),
        "chunks_embedded": embedded,
        "chunks_reused": reused,
    }


def unchanged_reingest(client: EngramClient, tenant: str, count: int) -> dict[str, Any]:
    documents = [DocumentIn(user_id=tenant, id=f"p{i}", text=t) for i, t in enumerate(passages(count))]
    say(f"1. {len(documents)} documents, first ingest ...")
    first = ingest(client, documents)
    say(f"   {first}; again, unchanged ...")
    second = ingest(client, documents)
    say(f"   {second}")
    return {
        "documents": len(documents),
        "first": first,
        "again": second,
        "speed_up": round(first["seconds"] / max(second["seconds"], 1e-3), 1),
    }


def edited_documents(client: EngramClient, tenant: str, count: int) -> dict[str, Any]:
    texts = passages(5000)
    per_document = 48  # msmarco passages of ~70 tokens: about twenty 240-token chunks
    paragraphs = [
        [texts[(d * per_document + p) % len(texts)] for p in range(per_document)] for d in range(count)
    ]
    documents = [
        DocumentIn(user_id=tenant, id=f"d{d}", text="\n\n".join(ps)) for d, ps in enumerate(paragraphs)
    ]
    say(f"2. {count} documents of {per_document} paragraphs, first ingest ...")
    first = ingest(client, documents)
    chunks = client.chunk_count([document_key(tenant, d.document_id) for d in documents])
    say(f"   {first}, {chunks} chunks; one paragraph edited in each ...")
    for ps in paragraphs:
        ps[per_document // 2] += EDIT
    edited = [DocumentIn(user_id=tenant, id=f"d{d}", text="\n\n".join(ps)) for d, ps in enumerate(paragraphs)]
    again = ingest(client, edited)
    each = [client.status(tenant, d.document_id).chunks_embedded or 0 for d in edited]
    say(f"   {again}; per document max {max(each)}")
    return {
        "documents": count,
        "chunks_per_document": round(chunks / count, 1),
        "first": first,
        "edited": again,
        "chunks_embedded_per_document_mean": round(sum(each) / len(each), 2),
        "chunks_embedded_per_document_max": max(each),
        "documents_over_2_chunks": sum(1 for n in each if n > 2),
    }


def engram(*args: str) -> dict[str, Any]:
    command = [ENGRAM, *args, "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=7200, check=False)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"engram {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def folder_sync(client: EngramClient, tenant: str, count: int) -> dict[str, Any]:
    texts = passages(count + count // 100)
    changed, added, deleted = max(1, count // 100), max(1, count // 200), max(1, count // 200)
    with tempfile.TemporaryDirectory(prefix="engram-sync-bench-") as tmp:
        folder = Path(tmp)
        for i in range(count):
            (folder / f"note-{i:05d}.md").write_text(f"# Note {i}\n\n{texts[i]}\n")
        say(f"3. a folder of {count} notes, first sync ...")
        started = time.monotonic()
        first = engram("ingest", str(folder), "--user", tenant, "--sync")
        first["seconds"] = round(time.monotonic() - started, 2)
        say(f"   {_brief(first)}; {changed} changed, {added} added, {deleted} deleted ...")
        for i in range(changed):
            path = folder / f"note-{i * 7:05d}.md"
            path.write_text(path.read_text() + "\nAn edited line.\n")
        for i in range(added):
            (folder / f"new-{i:03d}.md").write_text(f"# New {i}\n\n{texts[count + i]}\n")
        for i in range(deleted):
            (folder / f"note-{count - 1 - i * 3:05d}.md").unlink()
        dry = engram("ingest", str(folder), "--user", tenant, "--sync", "--dry-run")
        started = time.monotonic()
        second = engram("ingest", str(folder), "--user", tenant, "--sync")
        second["seconds"] = round(time.monotonic() - started, 2)
        say(f"   {_brief(second)}")
    report = client.reconcile(dry_run=True)
    return {
        "notes": count,
        "first": _brief(first),
        "dry_run": _brief(dry),
        "second": _brief(second),
        "reconcile_drift": report.get("drift_found"),
    }


def _brief(report: dict[str, Any]) -> dict[str, Any]:
    return {
        key: len(value) if isinstance(value, list) else value
        for key, value in report.items()
        if key not in ("source", "version")
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=2500)
    parser.add_argument("--edited", type=int, default=100)
    parser.add_argument("--notes", type=int, default=1000)
    parser.add_argument("--keep", action="store_true", help="leave the bench tenants' memories")
    args = parser.parse_args()
    run = f"bench-incr-{int(time.time())}"
    client = EngramClient()
    figures: dict[str, Any] = {}
    tenants = [f"{run}-unchanged", f"{run}-edited", f"{run}-sync"]
    try:
        if args.documents:
            figures["unchanged_reingest"] = unchanged_reingest(client, tenants[0], args.documents)
        if args.edited:
            figures["one_paragraph_edited"] = edited_documents(client, tenants[1], args.edited)
        if args.notes:
            figures["folder_sync"] = folder_sync(client, tenants[2], args.notes)
    finally:
        if not args.keep:
            for tenant in tenants:
                client.delete_where(tenant, SearchFilters(), everything=True)
        client.close()
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
