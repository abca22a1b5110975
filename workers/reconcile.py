"""Queue ``reconcile``: the reconciler's pass (shared/services/reconcile.py), scheduled and on demand."""

from __future__ import annotations

from typing import Any

from workers.app import RECONCILE_TASK, app
from workers.stage import container


# Acknowledged on receipt: a pass over a large store may outlast the visibility timeout, and a
# pass lost with its worker is simply the next scheduled one.
@app.task(name=RECONCILE_TASK, acks_late=False)
def run(dry_run: bool = False, scheduled: bool = False) -> dict[str, Any]:
    return container().reconciler.run(dry_run=dry_run, scheduled=scheduled).model_dump(mode="json")
