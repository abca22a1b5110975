"""Queue ``reconcile``: the reconciler's pass (shared/services/reconcile.py), scheduled and on demand."""

from __future__ import annotations

import logging
from typing import Any

from shared.errors import EngramError
from shared.ledger import Sent
from shared.models import utc_now
from shared.services import census, key_backup
from shared.services.restore_lock import RestoreLock
from shared.stores.neo4j_keys import Neo4jKeyRows
from workers.app import QUEUES, RECONCILE_TASK, RESTORE_TASK, app, resend
from workers.redeliver import give_up_in
from workers.stage import container

log = logging.getLogger(__name__)


# Acknowledged on receipt: a pass over a large store may outlast the visibility timeout, and a
# pass lost with its worker is simply the next scheduled one.
@app.task(name=RECONCILE_TASK, acks_late=False)
def run(dry_run: bool = False, scheduled: bool = False, force: bool = False) -> dict[str, Any]:
    c = container()
    redeliverer = c.redeliverer(lambda sent: resend(app, sent), _give_up, QUEUES)
    report = c.reconciler.run(dry_run=dry_run, scheduled=scheduled, force=force, redeliver=redeliverer.run)
    if not dry_run and report.primary_lost is None and report.qdrant_points:
        _keep_with_backup(report.qdrant_points)
    return report.model_dump(mode="json")


def _keep_with_backup(points: dict[str, int]) -> None:
    """After a pass that found the stores in step: the census status and /healthz compare the
    primary with (shared/services/census.py), and the API keys beside each collection
    (shared/services/key_backup.py). Neither may fail the pass."""
    c = container()
    try:
        store_id = c.graph.identity().store_id
        largest = max(points, key=lambda name: points[name])
        census.save(c.redis, largest, sum(points.values()), store_id, utc_now())
        stores = [c.vectors(model, dimension) for model, dimension in c.graph.models()]
        key_backup.back_up(Neo4jKeyRows(c.graph), [s for s in stores if s.collection in points])
    except EngramError as exc:
        log.warning("reconcile: the census or the keys' backup not written: %s", exc)


def _give_up(sent: Sent, reason: str) -> None:
    """A stage message lost after every resend: its documents end failed, with the reason."""
    give_up_in(container().progress)(sent, reason)


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
    lock: str | None = None,
) -> dict[str, Any]:
    """``engram restore``, in the process that may open Qdrant (shared/services/restore.py).

    ``lock``: the token the sender claimed the restore lock with (shared/services/restore_lock.py),
    kept alive here while the restore runs and released at its end; none for a dry run."""
    if lock is None:
        return _restore(to, tenant, dry_run, fresh, model, dimension)
    with RestoreLock(container().redis, container().settings.restore_lock_ttl_s).held(lock):
        return _restore(to, tenant, dry_run, fresh, model, dimension)


def _restore(
    to: str, tenant: str | None, dry_run: bool, fresh: bool, model: str | None, dimension: int | None
) -> dict[str, Any]:
    c = container()
    if to == "qdrant":
        page = c.settings.reconcile_batch_size
        report = c.restorer.to_qdrant(c.syncer, tenant=tenant, dry_run=dry_run, fresh=fresh, page=page)
    else:
        source = c.backup_source(model, dimension)
        report = c.restorer.to_neo4j(source, tenant=tenant, dry_run=dry_run, fresh=fresh)
        if not dry_run and report.error is None and report.store_id is not None:
            census.save(c.redis, source.name, source.count(), report.store_id, utc_now())
    return report.model_dump(mode="json")
