"""``engram ingest DIR --sync [--dry-run]``: the command around ``producers.cli.folder_sync``.

It reads the folder, says what it will do (added, changed, unchanged, to forget, unreadable),
then, unless ``--dry-run``, ingests the new and changed documents, waits for them, and forgets
the documents whose files are gone: only once every new and changed one is done (one failed, and
nothing is forgotten that run, as a renamed file's old document would go with its new one failed;
so ``--no-wait`` is refused). Exit codes as ``engram ingest``: 1 when a document failed,
a file could not be read or a forget found nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from producers.cli.common import load
from producers.cli.folder_sync import folder_source, plan, read_folder, to_forget
from producers.client import EngramClient
from shared.errors import InvalidInput


def sync(args: argparse.Namespace, defaults: dict[str, Any]) -> int:
    if len(args.paths) != 1 or not args.paths[0].is_dir():
        raise InvalidInput("--sync takes exactly one folder")
    if not args.user_id:
        raise InvalidInput("--sync needs --user: a folder is kept in step for one tenant")
    if args.no_wait:
        raise InvalidInput("--sync waits for its documents before it forgets any: no --no-wait")
    folder = args.paths[0]
    out = sys.stderr if args.json else sys.stdout
    read = read_folder(folder, args.user_id, defaults)
    source = folder_source(folder)
    client = EngramClient()
    changes = client.changes(read.documents)[0] if read.documents else []
    todo = plan(read, list(changes), client.source_documents(args.user_id, source), args.force)
    report: dict[str, Any] = {
        "source": source,
        "dry_run": args.dry_run,
        "added": [d.document_id for d in todo.added],
        "changed": [d.document_id for d in todo.changed],
        "unchanged": len(todo.unchanged),
        "forgotten": todo.forget,
        "unreadable": [{"file": name, "reason": reason} for name, reason in read.unreadable],
        "failed": 0,
    }
    print(
        f"sync of {source} for {args.user_id}: {len(todo.added)} new, {len(todo.changed)} changed, "
        f"{len(todo.unchanged)} unchanged, {len(todo.forget)} gone"
        + (" (dry run: nothing done)" if args.dry_run else ""),
        file=out,
    )
    for name, reason in read.unreadable:
        print(f"  {name}: unreadable, left as it is in memory ({reason})", file=out)
    if read.forget_nothing and read.unreadable:
        print("  an unreadable JSONL file: nothing is forgotten this run", file=out)
    if args.dry_run:
        for label, ids in (("new", report["added"]), ("changed", report["changed"]), ("gone", todo.forget)):
            for document_id in ids:
                print(f"  {label}: {document_id}", file=out)
        _finish(report, args.json)
        return 1 if read.unreadable else 0
    work = todo.added + todo.changed
    if work:
        report.update({k: v for k, v in load(client, work, args).items() if k != "unchanged"})
    missing = []
    if to_forget(todo, report["failed"]) != todo.forget:
        print(f"  {report['failed']} documents failed: nothing is forgotten this run", file=out)
        todo.forget, report["forgotten"] = [], []
    for document_id in todo.forget:
        if client.delete_document(args.user_id, document_id).memories == 0:
            missing.append(document_id)
    if todo.forget:
        print(f"forgot {len(todo.forget) - len(missing)} documents whose files are gone", file=out)
    _finish(report, args.json)
    return 1 if report["failed"] or read.unreadable or missing else 0


def _finish(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(report, indent=2, default=str))
