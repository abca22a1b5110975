"""``engram reembed``: everything re-embedded with the configured model, then switched to it."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from producers.cli.common import print_json
from producers.client import EngramClient
from shared.services.reembed import Progress as ReembedProgress


def register(commands: Any) -> None:
    reembed = commands.add_parser(
        "reembed",
        help="re-embed everything with the configured model and switch to it (start or resume)",
    )
    reembed.add_argument("--status", action="store_true", help="show the migration and its progress")
    reembed.add_argument(
        "--drop-old", action="store_true", help="after the switch, drop the old model's Qdrant collection"
    )
    reembed.add_argument("--no-wait", action="store_true", help="return once the pages are enqueued")
    reembed.add_argument("--page", type=int, help="memories per task")
    reembed.add_argument("--timeout", type=float, default=24 * 3600.0, help="seconds to wait for it")
    reembed.set_defaults(run=_reembed)


def _reembed(args: argparse.Namespace) -> int:
    client = EngramClient()
    if args.status:
        progress = client.reembed_progress()
        if progress is None:
            print("no model migration has run")
            return 0
        print_json(_progress_json(progress))
        return 0
    if args.drop_old:
        model, dimension = client.reembed_drop_old()
        print(f"dropped the Qdrant collection of {model} ({dimension} dimensions)")
        return 0
    if args.no_wait:
        migration, pages = client.reembed_start(args.page)
        print(f"migration to {migration.target.model} (run {migration.run}): enqueued {pages} pages")
        return 0
    interactive = sys.stdout.isatty()
    started = time.monotonic()
    last = [""]

    def show(progress: ReembedProgress) -> None:
        m = progress.migration
        line = (
            f"  {m.phase}: {progress.done}/{progress.total} memories re-embedded with {m.target.model}; "
            f"run {m.run}: {m.run_pages} pages, {m.run_reembedded} memories; "
            f"{time.monotonic() - started:.0f} s"
        )
        if interactive:
            print("\r" + line, end="", flush=True)
        elif line.split(";")[0] != last[0].split(";")[0]:
            print(line, flush=True)
        last[0] = line

    migration = client.reembed(show, timeout_s=args.timeout, page_size=args.page)
    if interactive:
        print()
    print(
        f"switched to {migration.target.model} ({migration.target.dimension} dimensions): "
        f"{migration.reembedded} memories re-embedded in {migration.pages} pages. Restart every worker "
        f"with this model; `engram reembed --drop-old` drops the collection of {migration.source[0]}"
    )
    return 0


def _progress_json(progress: ReembedProgress) -> dict[str, Any]:
    m = progress.migration
    return {
        "from": {"model": m.source[0], "dimension": m.source[1]},
        "to": {"model": m.target.model, "dimension": m.target.dimension, "backend": m.target.backend},
        "state": m.phase,
        "memories": progress.total,
        "done": progress.done,
        "run": m.run,
        "pages": m.pages,
        "reembedded": m.reembedded,
        "run_pages": m.run_pages,
        "run_reembedded": m.run_reembedded,
        "started_at": m.started_at,
        "switched_at": m.switched_at,
        "old_collection_dropped_at": m.old_dropped_at,
    }
