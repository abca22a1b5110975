"""``engram ingest``: files, folders or JSONL enqueued for ingestion (``--sync``: a folder kept
in step, ``producers/cli/sync.py``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from producers.cli.common import load, print_json, scope_arguments
from producers.cli.files import read_documents
from producers.cli.sync import sync
from producers.client import EngramClient
from shared.errors import InvalidInput


def register(commands: Any) -> None:
    ingest = commands.add_parser("ingest", help="enqueue files, folders or JSONL for ingestion")
    ingest.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    scope_arguments(ingest, user_required=False)
    ingest.add_argument("--memory-type", help="memory_type of documents that do not say")
    ingest.add_argument("--batch", type=int, help="documents per ingest task")
    ingest.add_argument("--no-wait", action="store_true", help="return once enqueued")
    ingest.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for the load")
    ingest.add_argument(
        "--force", action="store_true", help="chunk, embed and write documents stored unchanged too"
    )
    ingest.add_argument(
        "--sync",
        action="store_true",
        help="keep the tenant's documents from this folder in step with it: add new files, update "
        "changed ones, forget those gone from it (in both stores)",
    )
    ingest.add_argument("--dry-run", action="store_true", help="with --sync: list what it would do")
    ingest.add_argument("--json", action="store_true", help="print one JSON object when finished")
    ingest.set_defaults(run=_ingest)


def _ingest(args: argparse.Namespace) -> int:
    defaults = {
        key: value
        for key, value in {
            "user_id": args.user_id,
            "project_id": args.project_id,
            "session_id": args.session_id,
            "memory_type": args.memory_type,
        }.items()
        if value is not None
    }
    if args.sync:
        return sync(args, defaults)
    if args.dry_run:
        raise InvalidInput("--dry-run goes with --sync")
    documents = read_documents(args.paths, defaults)
    client = EngramClient()
    report = load(client, documents, args)
    if args.json:
        print_json(report)
    return 1 if report["failed"] else 0
