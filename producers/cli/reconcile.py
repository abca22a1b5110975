"""``engram reconcile``: what Qdrant is missing re-synced, drift found both ways."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from producers.cli.common import print_json
from producers.client import EngramClient


def register(commands: Any) -> None:
    reconcile = commands.add_parser("reconcile", help="re-sync what Qdrant is missing, find drift both ways")
    reconcile.add_argument("--dry-run", action="store_true", help="only report")
    reconcile.add_argument("--no-wait", action="store_true")
    reconcile.add_argument(
        "--force", action="store_true", help="let a mass deletion of orphan points through"
    )
    reconcile.set_defaults(run=_reconcile)


def _reconcile(args: argparse.Namespace) -> int:
    client = EngramClient()
    report = client.reconcile(
        dry_run=args.dry_run, timeout_s=None if args.no_wait else 600.0, force=args.force
    )
    print_json(report)
    refused = report.get("primary_lost") or report.get("mass_delete_refused")
    if refused:
        print(f"engram: reconcile deleted no orphan point: {refused}", file=sys.stderr)
    return 0 if not report.get("error") and not refused else 1
