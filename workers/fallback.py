"""Queue ``fallback``: searches of the embedded Qdrant folder, for query workers while Neo4j is down.

Only one process may open the embedded folder: the worker serving ``write`` and ``reconcile``.
It consumes this queue too (in a thread pool, so a search is answered while a batch is written)
and answers with Qdrant's raw hits; the query worker ranks them as it ranks Neo4j's. With a Qdrant
server the query worker searches it itself and this queue is not used.
"""

from __future__ import annotations

import time
from typing import Any

import celery
from celery.result import AsyncResult

from shared.errors import ServiceUnavailable
from shared.models import SearchFilters
from shared.search import Candidate, backup_candidates
from workers.app import FALLBACK, FALLBACK_TASK, app
from workers.stage import container

HINT = f"start the worker that owns the embedded Qdrant folder, consuming the {FALLBACK} queue"


@app.task(name=FALLBACK_TASK)
def fallback_search(
    model: str, dimension: int, vector: list[float], user_id: str, filters: dict[str, Any], limit: int
) -> list[dict[str, Any]]:
    """The tenant's nearest points passing the filters, as (payload, cosine similarity)."""
    store = container().vectors(model, dimension)
    hits = store.search(vector, user_id, SearchFilters.model_validate(filters), limit)
    return [{"payload": payload, "similarity": similarity} for payload, similarity in hits]


class FallbackRelay:
    """``BackupCandidates`` for a query worker: asks the folder's owner through the ``fallback`` queue.

    An owner that is up answers in milliseconds. If none has answered after ``probe_s``, the
    workers are asked which queues they consume: with no consumer of ``fallback`` the search
    fails at once (the message expires unread); a busy one is waited for until the deadline.
    """

    def __init__(self, model: str, dimension: int, probe_s: float = 1.0, inspect_s: float = 0.5) -> None:
        self._model = model
        self._dimension = dimension
        self._probe_s = probe_s
        self._inspect_s = inspect_s

    def candidates(
        self, vector: list[float], user_id: str, filters: SearchFilters, limit: int, timeout_s: float
    ) -> list[Candidate]:
        deadline = time.monotonic() + timeout_s
        if timeout_s <= 0:
            raise ServiceUnavailable("qdrant", "no time was left for the fallback search", HINT)
        arguments = (self._model, self._dimension, vector, user_id, filters.model_dump(mode="json"), limit)
        result = app.send_task(FALLBACK_TASK, args=arguments, expires=timeout_s)
        try:
            hits = self._answer(result, deadline)
        finally:
            result.forget()
        return backup_candidates((hit["payload"], hit["similarity"]) for hit in hits)

    def _answer(self, result: AsyncResult, deadline: float) -> list[dict[str, Any]]:
        try:
            return self._get(result, min(self._probe_s, deadline - time.monotonic()))
        except celery.exceptions.TimeoutError:
            pass
        if not self._consumed():
            result.revoke()
            raise ServiceUnavailable("qdrant", f"no worker consumes the {FALLBACK} queue", HINT)
        try:
            return self._get(result, deadline - time.monotonic())
        except celery.exceptions.TimeoutError as exc:
            result.revoke()
            raise ServiceUnavailable(
                "qdrant", f"the {FALLBACK} queue's worker did not answer in time", HINT
            ) from exc

    @staticmethod
    def _get(result: AsyncResult, timeout_s: float) -> list[dict[str, Any]]:
        hits: list[dict[str, Any]] = result.get(
            timeout=max(timeout_s, 0.01), propagate=True, disable_sync_subtasks=False
        )
        return hits

    def _consumed(self) -> bool:
        replies = app.control.inspect(timeout=self._inspect_s).active_queues() or {}
        return any(queue.get("name") == FALLBACK for queues in replies.values() for queue in queues or [])
