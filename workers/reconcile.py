"""Queue ``reconcile``: the reconciler's pass (shared/services/reconcile.py), scheduled and on demand."""

from __future__ import annotations

from typing import Any

from shared.ledger import Sent
from workers.app import QUEUES, RECONCILE_TASK, RESTORE_TASK, app, resend
from workers.stage import batch_of, batch_refs, container


# Acknowledged on receipt: a pass over a large store may outlast the visibility timeout, and a
# pass lost with its worker is simply the next scheduled one.
@app.task(name=RECONCILE_TASK, acks_late=False)
def run(dry_run: bool = False, scheduled: bool = False, force: bool = False) -> dict[str, Any]:
    c = container()
    redeliverer = c.redeliverer(lambda sent: resend(app, sent), _give_up, QUEUES)
    report = c.reconciler.run(dry_run=dry_run, scheduled=scheduled, force=force, redeliver=redeliverer.run)
    return report.model_dump(mode="json")


def _give_up(sent: Sent, reason: str) -> None:
    """A stage message lost after every resend: its documents end failed, with the reason."""
    batch = batch_of(sent.args, sent.task_id)
    container().progress.set(batch_refs(tuple(sent.args), sent.kwargs), "failed", reason, batch=batch)


# Acknowledged on receipt too: a restore outlasts the visibility timeout, and one lost with its
# worker goes on from its checkpoint when asked again (engram restore).
@app.task(name=RESTORE_TASK, acks_late=False)
def restore(
    to: str = "neo4j",
    tenant: str | None = None,
    dry_run: bool = False,
    fresh: bool = False,
    model: str | None = None,
    dimension: int | None = None,
) -> dict[str, Any]:
    """``engram restore``, in the process that may open Qdrant (shared/services/restore.py)."""
    c = container()
    if to == "qdrant":
        page = c.settings.reconcile_batch_size
        report = c.restorer.to_qdrant(c.syncer, tenant=tenant, dry_run=dry_run, fresh=fresh, page=page)
    else:
        source = c.backup_source(model, dimension)
        report = c.restorer.to_neo4j(source, tenant=tenant, dry_run=dry_run, fresh=fresh)
    return report.model_dump(mode="json")
