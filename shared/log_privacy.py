"""What Engram's processes may write to their logs: ids, counts and timings, never a tenant's
text, a search's results or a credential.

- Celery logs each task's return value when it succeeds (a search's whole answer, in
  ``worker-query.log``); ``quiet_task_results`` keeps the task's name, id and time alone.
- uvicorn's access log writes each request's path with its query string (where a client may
  have put a key, ``?api_key=...``); ``RedactQuery`` keeps the path and drops the query.
"""

from __future__ import annotations

import logging
from typing import Any

# celery.app.trace's own success line, less its ": %(return_value)s".
TASK_SUCCEEDED = "Task %(name)s[%(id)s] succeeded in %(runtime)ss"


def quiet_task_results() -> None:
    from celery.app import trace

    trace.LOG_SUCCESS = TASK_SUCCEEDED


def without_query(path: str) -> str:
    head, mark, _ = path.partition("?")
    return f"{head}?<query redacted>" if mark else head


class RedactQuery(logging.Filter):
    """On uvicorn's access log: the request's path without its query string."""

    def filter(self, record: logging.LogRecord) -> bool:
        args: Any = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], without_query(args[2]), *args[3:])
        return True


def redact_access_log() -> None:
    logging.getLogger("uvicorn.access").addFilter(RedactQuery())
