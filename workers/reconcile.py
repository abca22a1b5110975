"""Queue ``reconcile``: the reconciler's pass (shared/services/reconcile.py), scheduled and on demand."""

from __future__ import annotations

from typing import Any

from workers.app import RECONCILE_TASK, app
from workers.stage import container


@app.task(name=RECONCILE_TASK)
def run(dry_run: bool = False, scheduled: bool = False) -> dict[str, Any]:
    return container().reconciler.run(dry_run=dry_run, scheduled=scheduled).model_dump(mode="json")
