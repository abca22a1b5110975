"""What the ``engram`` commands share: the tenant and filter options, a tenant named on the
command line checked as the API checks it, a load enqueued and waited on, JSON printed."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from pydantic import TypeAdapter, ValidationError

from producers.client import EngramClient
from producers.client.waiting import LoadProgress
from shared.errors import InvalidInput, SearchTimeout
from shared.ids import document_key
from shared.models import DocumentIn, Identifier, SearchFilters
from shared.services.refs import DocRef


def scope_arguments(parser: argparse.ArgumentParser, user_required: bool) -> None:
    parser.add_argument("--user", dest="user_id", required=user_required, help="the tenant")
    parser.add_argument("--project", dest="project_id")
    parser.add_argument("--session", dest="session_id")


def filter_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--memory-type", action="append", dest="memory_types")
    parser.add_argument("--tag", action="append", dest="tags")


def filters_of(args: argparse.Namespace) -> SearchFilters:
    return SearchFilters(
        project_id=args.project_id,
        session_id=args.session_id,
        document_id=getattr(args, "document_id", None),
        memory_types=args.memory_types,
        tags=args.tags,
    )


def identifier(value: str, option: str = "--tenant") -> str:
    """A tenant named on the command line, checked as the API checks it."""
    try:
        return TypeAdapter(Identifier).validate_python(value)
    except ValidationError as exc:
        raise InvalidInput(f"{option} {value!r}: {exc.errors()[0]['msg']}") from exc


def load(client: EngramClient, documents: Sequence[DocumentIn], args: argparse.Namespace) -> dict[str, Any]:
    """Enqueues the documents (but those stored unchanged) and, unless --no-wait, shows progress
    until they are finished; returns the figures (``--json`` prints them)."""
    out = sys.stderr if args.json else sys.stdout
    started = time.monotonic()
    accepted = client.ingest(documents, batch_documents=args.batch, force=args.force)
    unchanged = set(accepted.unchanged)
    enqueued = [d for d in documents if d.document_id not in unchanged]
    said = f"; {len(unchanged)} unchanged (stored as given; --force redoes them)" if unchanged else ""
    print(f"enqueued {len(enqueued)} documents in {len(accepted.task_ids)} tasks{said}", file=out)
    keys = [document_key(d.user_id, d.document_id) for d in enqueued]
    refs = [(key, accepted.version) for key in keys]
    report: dict[str, Any] = {
        "documents": len(documents),
        "enqueued": len(enqueued),
        "unchanged": accepted.unchanged,
        "version": accepted.version,
        "failed": 0,
    }
    if args.no_wait:
        return report
    failed = wait_for(client, refs, started, args.timeout, out) if refs else 0
    elapsed = time.monotonic() - started
    chunks = client.chunk_count(keys) if keys else 0
    reused, embedded = client.chunk_work(refs) if refs else (0, 0)
    print(
        f"ingested {len(keys) - failed} documents, {chunks} chunks in {elapsed:.1f} s "
        f"({chunks / elapsed:.1f} chunks/s); chunks embedded {embedded}, reused {reused}; "
        f"unchanged: {len(unchanged)}; failed: {failed}",
        file=out,
    )
    report.update(
        failed=failed, chunks=chunks, chunks_embedded=embedded, chunks_reused=reused, seconds=elapsed
    )
    return report


def wait_for(
    client: EngramClient, keys: list[DocRef], started: float, timeout: float, out: TextIO = sys.stdout
) -> int:
    """Shows progress until every document is done or failed at the version this load gave it
    (or a newer one); returns how many failed."""
    interactive = out.isatty()
    last_line = ""
    progress = LoadProgress(keys)
    while True:
        states = progress.poll(client)
        finished = progress.finished
        elapsed = time.monotonic() - started
        line = (
            f"  {finished}/{len(keys)} documents finished ({states['failed']} failed); "
            f"queued {states['queued']}, chunking {states['chunking']}, embedding {states['embedding']}, "
            f"writing {states['writing']}; {elapsed:.0f} s"
        )
        if interactive:
            print("\r" + line, end="", flush=True, file=out)
        elif line != last_line and (finished == len(keys) or int(elapsed) % 5 == 0):
            print(line, flush=True, file=out)
        last_line = line
        if finished == len(keys):
            if interactive:
                print(file=out)
            return states["failed"]
        if elapsed > timeout:
            raise SearchTimeout(f"ingestion not finished after {timeout:g} s: {dict(states)}")
        time.sleep(progress.pause())


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str))
