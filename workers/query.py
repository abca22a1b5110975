"""Queue ``query``: answers searches in a worker of its own, so they never wait behind ingestion."""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import ValidationError

from shared.errors import InvalidInput
from shared.models import SearchRequest
from shared.search import Searcher
from workers import runtime
from workers.app import SEARCH_TASK, app


@cache
def searcher() -> Searcher:
    embedder = runtime.embedder()
    store = runtime.neo4j_with_schema(embedder.model_name, embedder.dimension)
    return Searcher(store, embedder, runtime.settings())


# No retries: the caller waits with a timeout, and a late answer is no answer.
@app.task(name=SEARCH_TASK)
def search(request: dict[str, Any]) -> dict[str, Any]:
    try:
        parsed = SearchRequest.model_validate(request)
    except ValidationError as exc:
        raise InvalidInput(f"search request is malformed: {exc}") from exc
    return searcher().search(parsed).model_dump(mode="json")
