"""``engram forget``: documents, memories, or the tenant's memories matching filters, deleted
from both stores."""

from __future__ import annotations

import argparse
from typing import Any

from producers.cli.common import filter_arguments, filters_of, scope_arguments
from producers.client import EngramClient
from shared.errors import InvalidInput
from shared.models import DeleteResult, SearchFilters


def register(commands: Any) -> None:
    forget = commands.add_parser(
        "forget", help="delete documents, or the tenant's memories matching filters, from both stores"
    )
    forget.add_argument("document_ids", nargs="*", metavar="DOCUMENT_ID")
    scope_arguments(forget, user_required=True)
    filter_arguments(forget)
    forget.add_argument("--memory-id", action="append", dest="memory_ids", help="one memory, by its id")
    forget.add_argument("--all", action="store_true", help="every memory of the tenant")
    forget.set_defaults(run=_forget)


def _forget(args: argparse.Namespace) -> int:
    client = EngramClient()
    results: list[tuple[str, DeleteResult]] = []
    for document_id in args.document_ids:
        results.append((f"document {document_id}", client.delete_document(args.user_id, document_id)))
    for memory_id in args.memory_ids or []:
        results.append((f"memory {memory_id}", client.delete_memory(args.user_id, memory_id)))
    filters = filters_of(args)
    if args.all or filters != SearchFilters():
        results.append(("matching memories", client.delete_where(args.user_id, filters, everything=args.all)))
    if not results:
        raise InvalidInput("name documents, --memory-id, filters, or --all")
    for what, result in results:
        where = "both stores" if result.qdrant_confirmed else "Neo4j; Qdrant left to the reconciler"
        gone = f"{result.memories} memories deleted from {where}" if result.memories else "nothing found"
        print(f"{what}: {gone}")
    return 1 if any(result.memories == 0 for _, result in results) else 0
