"""The one retry policy of Engram: what is retried, how long to wait, and for how long in all.

A transient failure (a service down, a timeout) is retried with exponential backoff and full
jitter for ``task_retry_budget_s`` from the first failure — hours, so an outage of Neo4j, Redis
or Qdrant delays work but loses none. A permanent failure is never retried. The Celery tasks
(workers/stage.py) and the reconciler's sync backoff read their numbers here.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from shared.errors import TransientError
from shared.settings import Settings


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    budget_s: float
    backoff_max_s: float
    backoff_base_s: float = 1.0
    time_limit_retries: int = 3
    """A task cut short by its time limit is tried this many more times, not for the budget."""

    @classmethod
    def from_settings(cls, settings: Settings) -> RetryPolicy:
        return cls(budget_s=settings.task_retry_budget_s, backoff_max_s=settings.task_retry_backoff_max_s)

    def backoff(self, retries: int) -> float:
        """Seconds before try ``retries + 1``: exponential, capped, with full jitter in its top half."""
        ceiling = min(self.backoff_max_s, self.backoff_base_s * 2.0 ** min(retries, 32))
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    def countdown(self, exc: BaseException, retries: int, failing_for_s: float) -> float | None:
        """How long to wait before trying again, or None when the failure is final."""
        if not isinstance(exc, TransientError) or failing_for_s >= self.budget_s:
            return None
        return min(self.backoff(retries), max(self.budget_s - failing_for_s, 0.0))
