"""The one retry policy of Engram: what is retried, how long to wait, and for how long in all.

A transient failure (a service down, a timeout) is retried with exponential backoff and full
jitter for ``task_retry_budget_s`` from the first failure — hours, so an outage of Neo4j, Redis
or Qdrant delays work but loses none. A permanent failure is never retried. The Celery tasks
(workers/stage.py) and the reconciler's sync backoff read their numbers here.

An HTTP client of the app (``producers.sdk``) retries by ``HttpRetry``: only an answer that
says "not now" (429, 503), a few times, waiting what its ``Retry-After`` asks. This module loads
no more than the standard library and ``shared.errors``, so the SDK may import it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING

from shared.errors import TransientError

if TYPE_CHECKING:
    from shared.settings import Settings


def jittered(base_s: float, max_s: float, retries: int) -> float:
    """Exponential from ``base_s``, capped at ``max_s``, with full jitter in its top half."""
    ceiling = min(max_s, base_s * 2.0 ** min(retries, 32))
    return ceiling / 2 + random.uniform(0, ceiling / 2)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    budget_s: float
    backoff_max_s: float
    backoff_base_s: float = 1.0
    time_limit_retries: int = 3
    """A task cut short by its time limit is tried this many more times, not for the budget:
    asked to stop by its soft limit (a Celery retry), or killed by its hard one (its message sent
    again, ``again_after_hard_limit``)."""

    @classmethod
    def from_settings(cls, settings: Settings) -> RetryPolicy:
        return cls(budget_s=settings.task_retry_budget_s, backoff_max_s=settings.task_retry_backoff_max_s)

    def backoff(self, retries: int) -> float:
        """Seconds before try ``retries + 1``: exponential, capped, with full jitter in its top half."""
        return jittered(self.backoff_base_s, self.backoff_max_s, retries)

    def again_after_hard_limit(self, resends: int) -> bool:
        """Whether a task killed by its hard time limit, its message already sent ``resends``
        times again, is sent once more rather than given up. A kill mid-stage is a fault like a
        lost worker: every stage is idempotent and resumes what is staged, so a busy machine's
        slow batch gets its tries, as one stopped by the soft limit does; one that outlasts the
        limit every time ends failed with its reason."""
        return resends < self.time_limit_retries

    def countdown(self, exc: BaseException, retries: int, failing_for_s: float) -> float | None:
        """How long to wait before trying again, or None when the failure is final."""
        if not isinstance(exc, TransientError) or failing_for_s >= self.budget_s:
            return None
        return min(self.backoff(retries), max(self.budget_s - failing_for_s, 0.0))


RETRIED_STATUSES = frozenset({429, 503})
"""Answers that mean "not now": too many requests, or a service (or the app's search queue) busy
or down for a moment. Every other status is final for the request that got it."""


@dataclass(frozen=True, slots=True)
class HttpRetry:
    """How a client of the HTTP app retries a request refused for now: at most ``attempts`` tries
    in all, waiting what ``Retry-After`` asks (seconds or an HTTP date), else a jittered backoff.
    A ``Retry-After`` beyond ``retry_after_max_s`` is not waited for: the caller gets the error."""

    attempts: int = 4
    backoff_base_s: float = 0.5
    backoff_max_s: float = 8.0
    retry_after_max_s: float = 30.0

    def delay(self, status: int, retry_after: str | None, attempt: int) -> float | None:
        """Seconds to wait before another try after try number ``attempt`` (from 1) got
        ``status``, or None when the answer stands."""
        if status not in RETRIED_STATUSES or attempt >= self.attempts:
            return None
        asked = retry_after_seconds(retry_after)
        if asked is None:
            return jittered(self.backoff_base_s, self.backoff_max_s, attempt - 1)
        return asked if asked <= self.retry_after_max_s else None


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """A ``Retry-After`` header in seconds (RFC 9110 §10.2.3: delay-seconds or an HTTP date);
    None when absent or unreadable."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())
