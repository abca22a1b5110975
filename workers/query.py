"""Queue ``query``: answers searches in a worker of its own, so they never wait behind ingestion."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from shared.errors import InvalidInput
from shared.models import SearchRequest
from workers.app import SEARCH_TASK, app
from workers.stage import container


# No retries: the caller waits with a timeout, and a late answer is no answer.
@app.task(name=SEARCH_TASK)
def search(request: dict[str, Any]) -> dict[str, Any]:
    try:
        parsed = SearchRequest.model_validate(request)
    except ValidationError as exc:
        raise InvalidInput(f"search request is malformed: {exc}") from exc
    response: dict[str, Any] = container().searcher().search(parsed).model_dump(mode="json")
    return response
