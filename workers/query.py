"""Queue ``query``: answers searches in a worker of its own, so they never wait behind ingestion.

When Neo4j is unreachable the answer comes from Qdrant (``source: "qdrant"`` and the reason in
``degraded``): a server is searched from here; the embedded folder through the ``fallback`` queue
of the one worker that may open it. Either way within what is left of the caller's timeout.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from functools import cache
from typing import Any

from celery import Task
from pydantic import ValidationError

from shared.errors import InvalidInput
from shared.models import SearchRequest, utc_now
from shared.search import Searcher
from workers.app import SEARCH_TASK, app
from workers.fallback import FallbackRelay
from workers.stage import container


@cache
def searcher() -> Searcher:
    c = container()
    return c.searcher(FallbackRelay(c.embedder.model_name, c.embedder.dimension))


def deadline(task: Task) -> float | None:
    """When the caller stops waiting (``time.monotonic``): the search task expires then."""
    expires = task.request.expires
    if not expires:
        return None
    moment = expires if isinstance(expires, datetime) else datetime.fromisoformat(str(expires))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return time.monotonic() + (moment - utc_now()).total_seconds()


# No retries: the caller waits with a timeout, and a late answer is no answer. No task events
# (Flower's): three Redis messages more per search, each a wake-up on a loaded machine; searches
# are counted in the metrics (shared/metrics.py), and their requests stay out of the monitor.
@app.task(name=SEARCH_TASK, bind=True, send_events=False)
def search(self: Task, request: dict[str, Any]) -> dict[str, Any]:
    try:
        parsed = SearchRequest.model_validate(request)
    except ValidationError as exc:
        raise InvalidInput(f"search request is malformed: {exc}") from exc
    return searcher().search(parsed, deadline(self)).model_dump(mode="json")
