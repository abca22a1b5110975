"""What every stage task shares: the process's container, the retry policy, recording failure.

Tasks are thin: they parse their message, call a stage service from the container, and send the
next stage's task. Here, in one place: a transient error is retried with backoff for the
policy's budget (hours), counted from the first failure, which travels with the retries; a task
cut short by its soft time limit is tried a few more times (each try resumes what is staged), and
so is one killed by its hard limit: Celery calls ``on_failure`` for it from the worker's main
process and acknowledges its message, so its message is sent again from the ledger, the policy's
``time_limit_retries`` times; and ``on_failure``, for whatever ended the task for good — a
permanent error, a spent budget, a time limit once more, staging gone — records every document of
the batch ``failed`` with the reason, so no document is left in a stage forever.

A task that cannot reach the broker to send its next stage or its retry (Redis restarting) hands
its own message back instead (``send_next``, ``retrying``): requeued at once if Redis is back by
the time the worker rejects it, else restored from ``unacked`` after the visibility timeout.
Celery's own answer to a retry it cannot publish is a rejection that drops the message.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any, NoReturn, Protocol

from billiard.einfo import ExceptionInfo
from celery import Task, states
from celery.exceptions import Reject, SoftTimeLimitExceeded, TimeLimitExceeded
from kombu.exceptions import OperationalError
from redis.exceptions import RedisError

from shared.container import Container
from shared.errors import EngramError, ServiceUnavailable
from shared.ledger import Owed, Sent
from shared.retry import RetryPolicy
from shared.settings import get_settings
from workers.app import resend, send_stage
from workers.messages import batch_of, batch_refs

log = logging.getLogger(__name__)

# What a send raises when Redis is away: kombu's and redis-py's connection errors, and the
# AttributeError of a producer channel kombu closed on the connection loss and hands out again.
BROKER_LOST: tuple[type[BaseException], ...] = (OperationalError, RedisError, OSError, AttributeError)
# The same, once the ledger's write has translated it (shared/ledger.py).
SEND_LOST: tuple[type[BaseException], ...] = (*BROKER_LOST, ServiceUnavailable)
# And any of Redis's failures on the ledger's side too.
RESEND_FAILED: tuple[type[BaseException], ...] = (*BROKER_LOST, EngramError)


_container_lock = threading.Lock()
_sent_again: set[str] = set()
"""Task ids whose message ``on_failure`` sent again after a hard time limit: still owed."""


class Resendable(Protocol):
    def owed(self, task_id: str) -> Sent | None: ...

    def resent(self, sent: Sent) -> None: ...


@cache
def container() -> Container:
    """The worker process's composition root, made on first use after the fork; once, even when
    the first tasks of a thread pool ask at the same moment (a second one would open the embedded
    Qdrant folder again, which fails)."""
    with _container_lock:
        return _one_container()


@cache
def _one_container() -> Container:
    return Container(get_settings())


class StageTask(Task):  # type: ignore[misc]
    """Base of the ingest, embed and write tasks; their ``documents`` argument names the batch."""

    # Retries are bounded by the policy's time budget, not by a count (``retrying`` below).
    max_retries = None

    def after_return(
        self,
        status: str,
        retval: Any,
        task_id: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        einfo: ExceptionInfo | None,
    ) -> None:
        """A task that ended for good (its next stage sent, or its documents recorded failed) is
        struck off the ledger; a retry or a message handed back stays owed. Redis away: the entry
        stays, and at worst the stage runs once more when its message is judged lost."""
        if status not in (states.SUCCESS, states.FAILURE) or _take(_sent_again, task_id):
            return
        try:
            container().ledger.strike(task_id)
        except EngramError as exc:
            log.warning("%s %s stays in the ledger: %s", self.name, task_id, exc)

    def on_failure(
        self,
        exc: BaseException,
        task_id: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        einfo: ExceptionInfo,
    ) -> None:
        if isinstance(exc, TimeLimitExceeded) and self._sent_again(task_id):
            return
        documents = batch_refs(args, kwargs)
        batch = batch_of(args, task_id)
        log.error("%s %s gave up on %d documents: %s", self.name, task_id, len(documents), exc)
        reason = f"{self.name}: {type(exc).__name__}: {exc}"
        try:
            container().progress.set(documents, "failed", reason, batch=batch)
        except EngramError as record_error:
            log.error("could not record the failure of %s: %s", task_id, record_error)

    def _sent_again(self, task_id: str) -> bool:
        c = container()
        try:
            again = send_again_after_hard_limit(
                c.ledger, c.retry_policy, lambda s: resend(self.app, s), task_id
            )
        except RESEND_FAILED as exc:
            log.error("%s %s killed by its time limit could not be sent again: %s", self.name, task_id, exc)
            return False
        if again:
            _sent_again.add(task_id)
            log.warning("%s %s killed by its hard time limit; its message is sent again", self.name, task_id)
        return again


def send_again_after_hard_limit(
    ledger: Resendable, policy: RetryPolicy, send: Callable[[Sent], None], task_id: str
) -> bool:
    """Sends again, under its task id, the message of a task its hard time limit killed, while the
    policy gives it tries; False when it is given up (or no longer owed)."""
    sent = ledger.owed(task_id)
    if sent is None or not policy.again_after_hard_limit(sent.resends):
        return False
    send(sent)
    ledger.resent(sent)
    return True


def _take(ids: set[str], task_id: str) -> bool:
    if task_id not in ids:
        return False
    ids.discard(task_id)
    return True


@contextmanager
def retrying(task: Task) -> Iterator[None]:
    """Turns a retryable failure into a Celery retry, carrying when the failing began."""
    try:
        yield
    except SoftTimeLimitExceeded as exc:
        if task.request.retries >= container().retry_policy.time_limit_retries:
            raise
        _retry(task, exc, countdown=1)
    except EngramError as exc:
        first = task.request.kwargs.get("failing_since") or time.time()
        countdown = container().retry_policy.countdown(exc, task.request.retries, time.time() - first)
        if countdown is None:
            raise
        log.warning("%s failed (%s); retrying in %.1f s", task.name, exc, countdown)
        _retry(task, exc, countdown=countdown, kwargs={**task.request.kwargs, "failing_since": first})


def _retry(task: Task, exc: BaseException, **options: Any) -> NoReturn:
    try:
        raise task.retry(exc=exc, **options) from exc
    except Reject as unsent:  # Celery could not publish the retry: it would drop this message
        log.warning("%s could not send its retry (%s); its message goes back", task.name, unsent.reason)
        raise Reject(unsent.reason, requeue=True) from exc


def send_next(
    task: Task, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], ledger: Owed | None = None
) -> None:
    """Sends the next stage's task (through the ledger: shared/ledger.py), or hands this task's
    message back to the broker when the broker cannot take it (the stage runs again: every stage
    is idempotent)."""
    try:
        send_stage(task.app, ledger or container().ledger, name, args, kwargs)
    except SEND_LOST as exc:
        log.warning("%s could not send %s (%s); its message goes back to the broker", task.name, name, exc)
        raise Reject(exc, requeue=True) from exc
