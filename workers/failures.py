"""Retry policy of the stage tasks, and recording documents as failed when a task gives up."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from celery import Task

from shared.errors import EngramError, TransientError
from shared.settings import get_settings
from workers import runtime

log = logging.getLogger(__name__)


def retry_policy() -> dict[str, Any]:
    """Transient errors retry with exponential backoff and jitter, a bounded number of times."""
    settings = get_settings()
    return {
        "bind": True,
        "autoretry_for": (TransientError,),
        "retry_backoff": True,
        "retry_backoff_max": settings.task_retry_backoff_max_s,
        "retry_jitter": True,
        "max_retries": settings.task_max_retries,
    }


@contextmanager
def recording_failure(task: Task, document_keys: Sequence[str]) -> Iterator[None]:
    """Marks the documents failed if the error is permanent or the last retry is spent."""
    try:
        yield
    except EngramError as exc:
        final = not isinstance(exc, TransientError) or task.request.retries >= (task.max_retries or 0)
        if final:
            log.error("%s gave up on %d documents: %s", task.name, len(document_keys), exc)
            runtime.progress().set(document_keys, "failed", f"{task.name}: {exc}")
        raise
