"""``engram search``: a search through the query queue, as the HTTP app's."""

from __future__ import annotations

import argparse
from typing import Any

from producers.cli.common import scope_arguments
from producers.client import EngramClient
from shared.models import SearchFilters, SearchRequest


def register(commands: Any) -> None:
    search = commands.add_parser("search", help="search memories through the query queue")
    search.add_argument("query")
    scope_arguments(search, user_required=True)
    search.add_argument("--top-k", type=int)
    search.add_argument("--threshold", type=float)
    search.add_argument("--memory-type", action="append", dest="memory_types")
    search.add_argument("--tag", action="append", dest="tags")
    search.add_argument("--json", action="store_true", help="print the raw response")
    search.add_argument("--timeout", type=float)
    search.set_defaults(run=_search)


def _search(args: argparse.Namespace) -> int:
    request = SearchRequest(
        query=args.query,
        user_id=args.user_id,
        top_k=args.top_k,
        threshold=args.threshold,
        filters=SearchFilters(
            project_id=args.project_id,
            session_id=args.session_id,
            memory_types=args.memory_types,
            tags=args.tags,
        ),
    )
    response = EngramClient().search(request, timeout_s=args.timeout)
    if args.json:
        print(response.model_dump_json(indent=2))
        return 0
    print(
        f"{response.count} results for {response.query!r} "
        f"(embedding {response.embedding_time_ms:.1f} ms, search {response.search_time_ms:.1f} ms, "
        f"from {response.source})"
    )
    for rank, result in enumerate(response.results, start=1):
        snippet = " ".join(result.content.split())[:160]
        print(
            f"{rank:>3}. similarity {result.similarity_score:.3f}  score {result.score:.3f}  "
            f"[{result.document_id}#{result.chunk_index}] {snippet}"
        )
    return 0
