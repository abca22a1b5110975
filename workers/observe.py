"""What the Celery processes say about themselves: their log lines and their metrics.

Connected to Celery's signals when workers/app.py is imported, so it holds in any worker or beat,
whoever starts it (supervisord, compose, the tests):

- ``celeryd_init`` and ``setup_logging``: Celery leaves logging to us (shared/logging_setup.py):
  JSON lines, or text with ``ENGRAM_LOG_FORMAT=text``. A worker writing JSON prints no banner
  (it is not one line).
- ``task_prerun`` / ``task_postrun``: each task's ids go on its log lines while it runs (task id,
  stage, tenant, document key and version, from the message: never its text), and its stage,
  outcome and time are counted (shared/metrics.py), in the pool's child that ran it.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from celery import signals

from shared import logging_setup, metrics
from shared.settings import get_settings
from shared.tasks import SEARCH_TASK
from workers.messages import batch_refs

_started: dict[str, float] = {}
_lock = threading.Lock()


@signals.setup_logging.connect
def _setup_logging(loglevel: int | str | None = None, **_: Any) -> None:
    fmt = logging_setup.resolved_format(get_settings(), service=True) or "json"
    logging_setup.configure(fmt, loglevel or "INFO")


@signals.celeryd_init.connect
def _worker_init(instance: Any = None, **_: Any) -> None:
    """A worker being made: its logging from here on (Celery warns of a root user before its
    own logging starts), and no banner with JSON lines."""
    fmt = logging_setup.resolved_format(get_settings(), service=True) or "json"
    logging_setup.configure(fmt, getattr(instance, "loglevel", None) or "INFO")
    if instance is not None and fmt == "json":
        instance.quiet = True


@signals.task_prerun.connect
def _task_started(
    task_id: str | None = None, task: Any = None, args: Any = None, kwargs: Any = None, **_: Any
) -> None:
    if task_id is None:
        return
    with _lock:
        _started[task_id] = time.monotonic()
    name = getattr(task, "name", None)
    tenants, documents = about(name, tuple(args or ()), dict(kwargs or {}))
    logging_setup.bind_task(task_id, name or "?", metrics.stage_of(name), tenants, documents)


@signals.task_postrun.connect
def _task_ended(
    task_id: str | None = None, task: Any = None, retval: Any = None, state: str | None = None, **_: Any
) -> None:
    with _lock:
        began = _started.pop(task_id or "", None)
    seconds = None if began is None else time.monotonic() - began
    try:
        metrics.task_ended(getattr(task, "name", None), state, seconds, retval)
    finally:
        logging_setup.clear_task()


def about(
    name: str | None, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[list[str], list[tuple[str, int]]]:
    """The tenants and (document key, version) a task's message names, read without its text."""
    tenants: list[str] = []
    if name == SEARCH_TASK and args and isinstance(args[0], dict):
        user = args[0].get("user_id")
        return ([user] if isinstance(user, str) else []), []
    if metrics.stage_of(name) not in ("chunk", "embed", "write"):
        return [], []
    documents = kwargs.get("documents")
    if documents is None and args and isinstance(args[-1], list):
        documents = args[-1]
    if isinstance(documents, list):
        tenants = [
            d["user_id"] for d in documents if isinstance(d, dict) and isinstance(d.get("user_id"), str)
        ]
    try:
        refs = [(str(key), int(version)) for key, version in batch_refs(args, kwargs)]
    except (TypeError, ValueError):
        refs = []
    return tenants, refs
