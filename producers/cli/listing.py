"""``engram list``: a tenant's memories, a page at a time (the module is not ``list``, a builtin)."""

from __future__ import annotations

import argparse
from typing import Any

from producers.cli.common import filter_arguments, filters_of, scope_arguments
from producers.client import EngramClient


def register(commands: Any) -> None:
    listing = commands.add_parser("list", help="list a tenant's memories, a page at a time")
    scope_arguments(listing, user_required=True)
    filter_arguments(listing)
    listing.add_argument("--document", dest="document_id")
    listing.add_argument("--limit", type=int, default=20)
    listing.add_argument("--cursor", help="the next_cursor a previous page printed")
    listing.add_argument("--json", action="store_true", help="print the raw page")
    listing.set_defaults(run=_list)


def _list(args: argparse.Namespace) -> int:
    page = EngramClient().list_memories(args.user_id, filters_of(args), args.limit, args.cursor)
    if args.json:
        print(page.model_dump_json(indent=2))
        return 0
    for memory in page.memories:
        snippet = " ".join(memory.content.split())[:100]
        where = f"[{memory.document_id}#{memory.chunk_index}] v{memory.version} {memory.vector_sync}"
        print(f"{memory.id}  {where}  {snippet}")
    print(f"next cursor: {page.next_cursor}" if page.next_cursor else f"{len(page.memories)} memories; end")
    return 0
