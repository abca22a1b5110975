"""What Engram's processes may write to their logs: ids, counts and timings, never a tenant's
text, a search's results or a credential.

- Celery logs each task's return value when it succeeds (a search's whole answer, in
  ``worker-query.log``); ``quiet_task_results`` keeps the task's name, id and time alone.
- uvicorn's access log writes each request's path with its query string (where a client may
  have put a key, ``?api_key=...``); ``RedactQuery`` keeps the path and drops the query.
- A logged traceback carries no local variables (``shared.logging_setup``): an ASGI frame's
  ``scope`` holds the request's headers, the caller's key and cookie among them. And whatever a
  line still says, ``redact_secrets`` masks in it, as the last step before it is written: API
  keys (``egk_<id>_<secret>`` keeps its id), Bearer tokens, the status page's cookie, and the
  values of the ``Authorization``, ``X-API-Key`` and ``Cookie`` headers however they are shown.
"""

from __future__ import annotations

import logging
import re
from typing import Any

MASK = "<redacted>"
_SECRETS = [
    (re.compile(r"(egk_[0-9a-f]{16}_)[A-Za-z0-9_-]+"), rf"\g<1>{MASK}"),
    (re.compile(r"(?i)(bearer\s+)[^\s\"',;)\\]+"), rf"\g<1>{MASK}"),
    (re.compile(r"(engram_ui=)[^\s\"',;)\\]+"), rf"\g<1>{MASK}"),
    # A header as a Python tuple (an ASGI scope's) or as "name: value" / "name=value".
    (
        re.compile(r"(?i)((?:authorization|x-api-key|cookie)['\"]?(?:,\s*b?|\s*[:=]\s*)['\"]?)[^'\"\n]+"),
        rf"\g<1>{MASK}",
    ),
]


def redact(text: str) -> str:
    """``text`` with every credential it shows masked (see the module)."""
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


def redact_secrets(_: Any, __: str, rendered: Any) -> Any:
    """structlog's last processor, after the renderer: the line as written, credentials masked."""
    if isinstance(rendered, str):
        return redact(rendered)
    if isinstance(rendered, bytes):
        return redact(rendered.decode("utf-8", "replace")).encode("utf-8")
    return rendered


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
