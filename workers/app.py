"""The Celery app: Redis broker and results, one queue per stage, reliable delivery.

Producers import this module only to send tasks by name (the names and queues are defined in
shared/tasks.py, and offered here too); the task modules, and the models and stores they load, are
imported by the worker processes alone.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from celery import Celery
from kombu.entity import Queue

import workers.observe  # noqa: F401  (logs and metrics of every worker and beat: Celery's signals)
from shared import redis_client
from shared.errors import EngramError
from shared.ledger import Owed, Sent
from shared.log_privacy import quiet_task_results
from shared.settings import Settings, get_settings
from shared.tasks import (
    CHUNK_TASK,
    DROP_COLLECTION_TASK,
    EMBED,
    EMBED_TASK,
    FALLBACK,
    FALLBACK_TASK,
    INGEST,
    QUERY,
    QUEUES,
    RECONCILE,
    RECONCILE_TASK,
    REEMBED_TASK,
    RESTORE_TASK,
    ROUTES,
    SEARCH_TASK,
    STAGE_QUEUES,
    SYNC_TASK,
    WRITE,
    WRITE_TASK,
)
from workers import fair_share

SEARCH_SHOWN = {"argsrepr": "(search request)", "kwargsrepr": "{}"}
"""What a search task's message shows of its arguments (its headers, Flower, a worker's log): not
the query's text, and no repr of the request made on every send (a millisecond under load)."""

TASK_MODULES = [
    "workers.ingest",
    "workers.embed",
    "workers.write",
    "workers.query",
    "workers.reconcile",
    "workers.fallback",
    "workers.redeliver",  # no task: the lost-message pass every worker runs
]

__all__ = [
    "CHUNK_TASK",
    "DROP_COLLECTION_TASK",
    "EMBED",
    "EMBED_TASK",
    "FALLBACK",
    "FALLBACK_TASK",
    "INGEST",
    "QUERY",
    "QUEUES",
    "RECONCILE",
    "RECONCILE_TASK",
    "REEMBED_TASK",
    "RESTORE_TASK",
    "SEARCH_SHOWN",
    "SEARCH_TASK",
    "STAGE_QUEUES",
    "SYNC_TASK",
    "TASK_MODULES",
    "WRITE",
    "WRITE_TASK",
    "app",
    "make_app",
    "resend",
    "send_stage",
]


def make_app(settings: Settings | None = None, results: bool = True) -> Celery:
    """The app for these settings (the process's own by default); ``results=False`` makes one that
    only sends, with no result backend (the HTTP app awaits search results itself, see
    producers/http/results.py). Workers always store results."""
    settings = settings or get_settings()
    # Kombu's live workers look for messages unacknowledged past the timeout (a dead worker's)
    # every 10 s, but its Redis transport scans only one look in ``unacked_restore_throttle``
    # (10 by default): a killed host's task came back 74 to 134 s after the kill, up to 100 s
    # past the timeout. Each look scans: the settings' bound (pipeline.py) holds again.
    visibility = {"visibility_timeout": settings.visibility_timeout_s}
    restore = {"unacked_restore_throttle": 1}
    sentinels = redis_client.transport_options(settings)
    app = Celery("engram", include=TASK_MODULES)
    # Broker and result backend: the URL, and the password beside it (never in a URL).
    connections = redis_client.celery_config(settings)
    if not results:
        connections["result_backend"] = None
    app.conf.update(
        **connections,
        task_queues=[Queue(name) for name in QUEUES],
        task_default_queue=INGEST,
        task_routes={name: {"queue": queue} for name, queue in ROUTES.items()},
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        # A task is acknowledged only when done, and re-queued if its worker process dies.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        # Redis re-delivers unacknowledged messages after this; it must outlast the longest task.
        # And searches are taken by their priority, a tenant's fair share (workers/fair_share.py).
        # With Sentinels, both name the primary to ask them for (shared/redis_client.py).
        broker_transport_options={**visibility, **restore, **fair_share.broker_options(), **sentinels},
        result_backend_transport_options={**visibility, **sentinels},
        task_soft_time_limit=settings.task_soft_time_limit_s,
        task_time_limit=settings.task_time_limit_s,
        worker_soft_shutdown_timeout=settings.worker_soft_shutdown_timeout_s,
        worker_enable_soft_shutdown_on_idle=True,
        # A lost broker connection lets running tasks finish: their writes are idempotent, and a
        # message whose ack is lost with the connection is redelivered after the visibility
        # timeout. (Cancelling them would drop tasks whose messages Redis no longer holds.)
        worker_cancel_long_running_tasks_on_connection_loss=False,
        # Sending (a next stage, a retry, a producer's batch) rides out a Redis restart.
        task_publish_retry=True,
        task_publish_retry_policy={
            "max_retries": 12,
            "interval_start": 0.2,
            "interval_step": 0.5,
            "interval_max": 3.0,
        },
        broker_connection_retry_on_startup=True,
        result_expires=3600,
        worker_hijack_root_logger=False,
        beat_schedule={
            "reconcile": {
                "task": RECONCILE_TASK,
                "schedule": float(settings.reconcile_interval_s),
                "kwargs": {"scheduled": True},
                # A run nobody picked up before the next one is due is dropped, not piled up.
                "options": {"expires": float(settings.reconcile_interval_s)},
            }
        },
    )
    return app


def send_stage(
    sender: Celery, ledger: Owed, name: str, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None
) -> str:
    """Sends a stage message, written to the ledger first so a message the broker loses is sent
    again (shared/services/redeliver.py); the task id is the ledger's. A send that fails strikes
    its entry again where Redis lets it (the caller reports the failure)."""
    sent = ledger.record(name, STAGE_QUEUES[name], args, kwargs or {})
    try:
        sender.send_task(name, args=args, kwargs=kwargs, task_id=sent.task_id)
    except BaseException:
        with suppress(EngramError):
            ledger.strike(sent.task_id)
        raise
    return sent.task_id


def resend(sender: Celery, sent: Sent) -> None:
    """A lost stage message sent again as it was, under its task id (a chunk task's id is its batch's)."""
    sender.send_task(sent.name, args=sent.args, kwargs=sent.kwargs, task_id=sent.task_id)


app = make_app()
# A task's success is logged with its name, id and time, never its result (a search's answer).
quiet_task_results()
