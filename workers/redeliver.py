"""Every worker looks for the stage messages the broker lost, not beat's reconciler alone.

Kombu's Redis transport loses a message whose worker dies between the BRPOP that takes it and
its record in ``unacked`` (shared/ledger.py); the visibility timeout cannot bring it back, as
Redis holds no copy. The ledger's pass (shared/services/redeliver.py) sends such a message again,
but it ran only inside the reconciler, which beat sends from the main host every
``ENGRAM_RECONCILE_INTERVAL_S``. Issue 27's second-host row lost a write message so: the worker
host killed mid-ingest had just taken it, no beat ran in the row, and five documents stayed
``writing`` for good. In production the pass came up to five minutes later, and never while the
host lost was the one that runs beat.

So the main process of every worker, on every host, offers to run the pass every half grace
(``ENGRAM_REDELIVER_AFTER_S`` / 2), in a thread of its own; a claim in Redis that frees itself
after the interval lets one of them run it each interval. A lost message is sent again one to
one and a half graces after its send, by whichever hosts live. The pass needs Redis alone: the
thread has a container of its own that opens nothing else (the tasks' container, made after the
pool's fork, is left alone).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from celery import Celery, signals

from shared.container import Container
from shared.errors import EngramError
from shared.ledger import Ledger, Sent
from shared.progress import Progress
from shared.services.redeliver import Redelivered, Redeliverer
from shared.settings import get_settings
from workers.app import QUEUES, resend
from workers.messages import batch_of, batch_refs

log = logging.getLogger(__name__)

_stop = threading.Event()


def interval_s(grace_s: float) -> float:
    """How often a worker offers to run the pass: half the grace a message is given."""
    return max(grace_s / 2, 1.0)


def give_up_in(progress: Progress) -> Callable[[Sent, str], None]:
    """What the pass does with a message lost after every resend: its documents end failed."""

    def give_up(sent: Sent, reason: str) -> None:
        batch = batch_of(sent.args, sent.task_id)
        progress.set(batch_refs(tuple(sent.args), sent.kwargs), "failed", reason, batch=batch)

    return give_up


def sweep_once(ledger: Ledger, redeliverer: Redeliverer, owner: str, every_s: float) -> Redelivered | None:
    """The pass, when this worker's claim on the interval is the one that holds; else None."""
    if not ledger.claim_pass(owner, every_s):
        return None
    return redeliverer.run()


def sweep(app: Celery, owner: str, stop: threading.Event) -> None:
    """Offers to run the pass every interval until ``stop``; Redis away skips an interval."""
    c = Container(get_settings())
    every_s = interval_s(c.settings.redeliver_after_s)
    redeliverer = c.redeliverer(lambda sent: resend(app, sent), give_up_in(c.progress), QUEUES)
    while not stop.wait(every_s):
        try:
            done = sweep_once(c.ledger, redeliverer, owner, every_s)
        except EngramError as exc:
            log.warning("the lost-message pass did not run: %s", exc)
            continue
        if done is not None and (done.resent or done.given_up):
            log.warning("lost-message pass: %d sent again, %d given up", done.resent, done.given_up)


@signals.worker_ready.connect
def _start(sender: Any = None, **_: Any) -> None:
    app = getattr(sender, "app", None)
    if app is None:
        return
    owner = str(getattr(sender, "hostname", "") or "worker")
    threading.Thread(target=sweep, args=(app, owner, _stop), name="engram-redeliver", daemon=True).start()


@signals.worker_shutting_down.connect
def _stop_sweeping(**_: Any) -> None:
    _stop.set()
