"""Queue ``query``: answers searches in a worker of its own, so they never wait behind ingestion.

When Neo4j is unreachable the answer comes from Qdrant (``source: "qdrant"`` and the reason in
``degraded``): a server is searched from here; the embedded folder through the ``fallback`` queue
of the one worker that may open it. Either way within what is left of the caller's timeout.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from functools import cache
from typing import Any

from celery import Task, signals
from pydantic import ValidationError

from shared.errors import EngramError, InvalidInput
from shared.models import SearchRequest, utc_now
from shared.search import Searcher
from workers.app import QUERY, SEARCH_TASK, app
from workers.fallback import FallbackRelay
from workers.stage import container

log = logging.getLogger(__name__)
_searcher_lock = threading.Lock()

SEARCH_RESULT_TTL_S = 60
"""How long a worker that serves searches alone keeps a search's result in Redis. Its caller
subscribed to the result's channel before sending and reads the answer from the published message,
milliseconds later, then deletes it off the answer's path (the client with its next ping, the HTTP
app beside its answer); a result no caller read or deleted goes by itself, soon."""


def searcher() -> Searcher:
    """The process's searcher, made once even when the warm-up and a first search ask at once."""
    with _searcher_lock:
        return _one_searcher()


@cache
def _one_searcher() -> Searcher:
    c = container()
    return c.searcher(FallbackRelay(c.embedder.model_name, c.embedder.dimension))


def serves_searches_alone(queues: str | Iterable[str] | None) -> bool:
    """Whether a worker's ``-Q`` (a list, or the comma-separated string) names the query queue alone."""
    names = queues.split(",") if isinstance(queues, str) else list(queues or ())
    return [name.strip() for name in names] == [QUERY]


@signals.celeryd_init.connect
def _serve_searches_lightly(conf: Any = None, options: Any = None, **_: Any) -> None:
    """A worker made to consume the query queue alone drops two things a search never uses (before
    its connections are made, so for its pool's children too):

    - **The broker's acknowledgement bookkeeping** (kombu's ``ack_emulation``): a Redis transaction
      a search, copying its message into ``unacked`` before the task can start, for a redelivery
      after ``ENGRAM_VISIBILITY_TIMEOUT_S`` (75 s), when the search has expired (at its caller's
      timeout, 10 s) and would be dropped unread. A message this worker holds is put back if its
      pool child dies (``task_reject_on_worker_lost``) or it stops; only a host that dies loses the
      one or two it held, whose callers time out, as they would waiting for the redelivery.
    - **A result kept for an hour** (``result_expires``): kept ``SEARCH_RESULT_TTL_S``.
    """
    if conf is None or not serves_searches_alone((options or {}).get("queues")):
        return
    conf.broker_transport_options = {**conf.broker_transport_options, "ack_emulation": False}
    conf.result_expires = SEARCH_RESULT_TTL_S


@signals.worker_process_init.connect
def _warm_when_serving_searches(**_: Any) -> None:
    """A pool process of a worker that serves the query queue loads the model, dateparser's data
    and a Neo4j connection at once, in a thread (a pool process must report alive within
    seconds), not in the first search it is given: seconds, where a search takes milliseconds."""
    if QUERY in app.amqp.queues.consume_from:
        threading.Thread(target=_warm, name="query-warm-up", daemon=True).start()


def _warm() -> None:
    started = time.perf_counter()
    try:
        searcher().warm()
    except EngramError as exc:  # the first search will say it again, to its caller
        log.warning("query worker not warmed up: %s", exc)
        return
    log.info("query worker warmed up in %.2f s", time.perf_counter() - started)


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
