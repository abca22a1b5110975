"""``engram status``: a document's status, or the whole store's overview."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from producers.cli.common import print_json
from producers.client import EngramClient
from shared.errors import InvalidInput


def register(commands: Any) -> None:
    status = commands.add_parser("status", help="a document's status, or the whole store's")
    status.add_argument("document_id", nargs="?")
    status.add_argument("--user", dest="user_id")
    status.set_defaults(run=_status)


def _status(args: argparse.Namespace) -> int:
    client = EngramClient()
    if args.document_id:
        if not args.user_id:
            raise InvalidInput("a document's status needs --user")
        status = client.status(args.user_id, args.document_id)
        print(status.model_dump_json(indent=2))
        return 0 if status.state != "unknown" else 1
    overview = client.overview()
    print_json(overview)
    stores = overview["stores"]
    points, counted = stores["qdrant_points"], stores["qdrant_points_counted_at"]
    qdrant = (
        "not counted yet (embedded: each reconcile pass counts them)"
        if points is None
        else f"{points} points"
    )
    print(
        f"Neo4j: {stores['neo4j_memories']} memories; Qdrant ({stores['qdrant']}): {qdrant}"
        + ("" if counted is None else f" (counted {counted})"),
        file=sys.stderr,
    )
    if stores["primary_lost"]:
        print(f"engram: {stores['primary_lost']}", file=sys.stderr)
        return 1
    return 0
