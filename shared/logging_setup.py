"""How every Engram process writes its log: one JSON object a line, or text for people.

``ENGRAM_LOG_FORMAT``: ``json`` (one event a line, for Loki, Elasticsearch, ``jq``), ``text``
(structlog's console lines, for a person at a terminal). Unset, the services (Celery workers,
beat, ``engram serve``) write JSON and the CLI's other commands leave Python's logging as it is
(their warnings, plain text, on stderr).

Every line comes through the standard library's logging, whoever logs it (Celery, uvicorn, the
Neo4j driver, our modules), rendered by structlog's ``ProcessorFormatter``; what a task is about
rides along from structlog's context variables (``bind_task``): ``task_id``, ``task``, ``stage``,
``tenant``, ``document`` and ``version`` (or ``documents``, a batch's count), where known. A
document's text, a search's query or results, a credential: never (shared/log_privacy.py keeps
Celery's and uvicorn's own lines clear of them and masks any credential a line still shows, and a
traceback has no local variables; what we log ourselves is ids, counts and reasons).
"""

from __future__ import annotations

import logging
import logging.config
import sys
from collections.abc import Iterable
from typing import Any, Literal

import structlog
from structlog.processors import ExceptionRenderer
from structlog.tracebacks import ExceptionDictTransformer

from shared.log_privacy import redact_secrets
from shared.settings import Settings

Format = Literal["json", "text"]


def resolved_format(settings: Settings, service: bool) -> Format | None:
    """The format a process writes: the setting, else json for a service; None: leave logging
    alone (the CLI by default)."""
    if settings.log_format is not None:
        return settings.log_format
    return "json" if service else None


def _pre_chain() -> list[Any]:
    """For records of the standard library: the message as formatted, and nothing a caller put
    on the record with ``extra=`` (Celery's failure line puts the task's arguments there: a
    document's text)."""
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


def formatter(fmt: Format = "json") -> logging.Formatter:
    """The formatter of every handler; also named in uvicorn's dictConfig (``"()"``)."""
    if fmt == "json":
        renderer: Any = structlog.processors.JSONRenderer(default=str)
        # A traceback's frames without their local variables: an ASGI frame's ``scope`` holds
        # the request's headers (the caller's key, the page's cookie), 100 KB a request.
        last: list[Any] = [ExceptionRenderer(ExceptionDictTransformer(show_locals=False))]
    else:
        # Python's own traceback: rich's (when installed) would print each frame's variables
        plain = structlog.dev.plain_traceback
        renderer = structlog.dev.ConsoleRenderer(colors=False, exception_formatter=plain)
        last = []
    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=_pre_chain(),
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            *last,
            renderer,
            redact_secrets,
        ],
    )


def configure(fmt: Format, level: int | str = logging.INFO, stream: Any = None) -> None:
    """The root logger writes every record through ``formatter(fmt)`` to ``stream`` (stderr);
    Python's warnings become log records too. structlog's own loggers go the same way."""
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.stdlib.filter_by_level,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(formatter(fmt))
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level)
    logging.captureWarnings(True)


def uvicorn_config(fmt: Format, level: str = "INFO") -> dict[str, Any]:
    """A dictConfig for ``uvicorn.run(log_config=...)``, applied in each app process: every
    logger (uvicorn's and ours) in ``fmt``; the access log without query strings."""
    handler = {"class": "logging.StreamHandler", "formatter": "engram", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"redact_query": {"()": "shared.log_privacy.RedactQuery"}},
        "formatters": {"engram": {"()": "shared.logging_setup.formatter", "fmt": fmt}},
        "handlers": {"default": handler, "access": {**handler, "filters": ["redact_query"]}},
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": "INFO", "propagate": False},
            "uvicorn.error": {"level": "INFO"},
            "uvicorn.access": {"handlers": ["access"], "level": "INFO", "propagate": False},
        },
        "root": {"handlers": ["default"], "level": level.upper()},
    }


# What a task is about, on every line logged while it runs.

BATCH_SHOWN = 20


def bind_task(
    task_id: str,
    task: str,
    stage: str,
    tenants: Iterable[str] = (),
    documents: list[tuple[str, int]] | None = None,
) -> None:
    """Binds the running task's ids to this thread's log context (``clear_task`` unbinds)."""
    structlog.contextvars.clear_contextvars()
    fields: dict[str, Any] = {"task_id": task_id, "task": task, "stage": stage}
    named = sorted(set(tenants))
    if len(named) == 1:
        fields["tenant"] = named[0]
    elif named:
        fields["tenants"] = named[:BATCH_SHOWN]
    if documents:
        if len(documents) == 1:
            fields["document"], fields["version"] = documents[0]
        else:
            fields["documents"] = len(documents)
            fields["document_keys"] = [key for key, _ in documents[:BATCH_SHOWN]]
    structlog.contextvars.bind_contextvars(**fields)


def clear_task() -> None:
    structlog.contextvars.clear_contextvars()
