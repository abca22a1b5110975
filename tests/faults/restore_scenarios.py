"""Scenarios of a store lost and brought back: the primary's data (Neo4j) or the backup (Qdrant).

``primary-wiped``: Neo4j's data folder is lost (stopped, moved away, started empty) after the
stores were found in step; one new document is written; a reconcile pass runs while the primary
is wiped and must delete nothing (it reports ``primary_lost``); then ``engram restore`` rebuilds
Neo4j from Qdrant and one pass must find parity. The backup's points are counted before the wipe
and after the refused pass: they must all be there.

``backup-lost``: the embedded Qdrant folder is lost (the write worker stopped, the folder
deleted, the worker started again); ``engram restore --to qdrant`` rebuilds it from Neo4j.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from collections.abc import Callable
from typing import Any

from tests.faults.parity import read_qdrant
from tests.faults.trial import Context, ScenarioResult, Trial

Scenario = Callable[[Context], ScenarioResult]


def _points(context: Context, user_id: str | None = None) -> int:
    """Points in the collection (of one tenant if named), read with the write worker paused."""
    stack = context.stack
    stack.stop_worker("write", warm=True)
    try:
        with stack.backup() as store:
            if store is None:
                return 0
            if user_id is None:
                return store.count()
            return len(read_qdrant(store, user_id))
    finally:
        stack.start_worker("write")


def _restore(trial: Trial, **options: Any) -> dict[str, Any] | None:
    started = time.monotonic()
    try:
        result = trial.context.client.start_restore(**options)
        report: dict[str, Any] = result.get(timeout=trial.options.repair_timeout_s)
    except Exception as exc:
        trial.note(f"restore: {type(exc).__name__}: {exc}")
        return None
    documents = f" of {report['documents']} documents" if report["to"] == "neo4j" else ""
    trial.note(
        f"restore to {report['to']}: {report['restored']} memories{documents}, "
        f"synced {report['synced']}, unreadable {report['unreadable_count']}, "
        f"{time.monotonic() - started:.1f} s"
    )
    return report


def _failed(result: ScenarioResult, why: str) -> ScenarioResult:
    return dataclasses.replace(result, parity=False, repair_s=None, detail=f"{why}; {result.detail}")


def primary_wiped(context: Context) -> ScenarioResult:
    """Neo4j's data is lost; a pass while it is wiped deletes nothing; engram restore brings it back."""
    trial = Trial(context, "primary-wiped")
    stack = context.stack
    docs = trial.documents()
    trial.ingest(docs)
    trial.settle()
    trial.reconcile()  # the stores found in step: the collection records the primary's store id
    before = _points(context)

    stack.neo4j_stop()
    data = stack.data_dir / "neo4j" / "data"
    lost = stack.data_dir / f"neo4j-data-lost-{int(time.time())}"
    data.rename(lost)
    stack.neo4j_start()
    trial.note(f"Neo4j's data moved away with {before} points in Qdrant")
    trial.ingest(trial.documents(count=1, start=len(docs)), batch=1)  # a write to the new primary
    trial.settle()
    try:
        wiped = context.client.reconcile(timeout_s=trial.options.reconcile_timeout_s)
    except Exception as exc:
        wiped = {"error": f"{type(exc).__name__}: {exc}"}
    kept = _points(context)
    refused = bool(wiped.get("primary_lost")) and not (wiped.get("drift_fixed") or {}).get("orphan_points")
    trial.note(
        f"pass while wiped: orphans found {(wiped.get('drift_found') or {}).get('orphan_points')}, "
        f"deleted {(wiped.get('drift_fixed') or {}).get('orphan_points')}, refused={refused}; "
        f"points {before} -> {kept}"
    )

    trial.undone()
    _restore(trial, to="neo4j")
    result = trial.finish()
    shutil.rmtree(lost, ignore_errors=True)
    if not refused or kept < before:
        return _failed(result, f"the pass while wiped did not refuse (points {before} -> {kept})")
    return result


def backup_lost(context: Context) -> ScenarioResult:
    """Qdrant's embedded folder (of the configured engine) is lost; engram restore --to qdrant
    rebuilds it from Neo4j."""
    trial = Trial(context, "backup-lost")
    stack = context.stack
    trial.ingest(trial.documents())
    trial.settle()
    trial.reconcile()
    stack.stop_worker("write", warm=True)
    shutil.rmtree(stack.qdrant_folder)
    stack.start_worker("write")
    trial.note("Qdrant's folder deleted")

    trial.undone()
    _restore(trial, to="qdrant")
    result = trial.finish()
    points = _points(context, trial.user_id)
    if points != result.expected:
        return _failed(result, f"{points} points after the restore, {result.expected} expected")
    return result


RESTORE_SCENARIOS: dict[str, Scenario] = {
    "primary-wiped": primary_wiped,
    "backup-lost": backup_lost,
}
