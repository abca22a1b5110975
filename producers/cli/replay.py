"""``engram replay``: documents that failed for good re-driven from what is staged."""

from __future__ import annotations

import argparse
from typing import Any

from producers.client import EngramClient


def register(commands: Any) -> None:
    replay = commands.add_parser(
        "replay", help="re-drive documents that failed for good, from what is staged"
    )
    replay.add_argument(
        "document_ids", nargs="*", metavar="DOCUMENT_ID", help="these (with --user), else every failed one"
    )
    replay.add_argument("--user", dest="user_id", help="the tenant of the documents named")
    replay.set_defaults(run=_replay)


def _replay(args: argparse.Namespace) -> int:
    report = EngramClient().replay(args.user_id, args.document_ids)
    print(f"re-driven: {report.write} to the write stage, {report.embed} to the embed stage")
    if report.not_staged:
        print(f"{len(report.not_staged)} failed documents have nothing staged: post them again")
    return 1 if report.not_staged else 0
