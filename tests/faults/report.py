"""The fault suite's output: a header with the settings that decide recovery, a table, JSON lines."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict

from shared.settings import Settings
from tests.faults.trial import Options, ScenarioResult

# Settings of the code under test that bound how fast a fault is repaired.
RECOVERY_SETTINGS = (
    "visibility_timeout_s",
    "task_time_limit_s",
    "task_retry_budget_s",
    "task_retry_backoff_max_s",
    "worker_soft_shutdown_timeout_s",
    "reconcile_grace_s",
)

COLUMNS = ("scenario", "sent", "expected", "lost", "dup", "parity", "repair_s", "detail")


def header(settings: Settings, options: Options) -> str:
    code = " ".join(f"{name}={getattr(settings, name)}" for name in RECOVERY_SETTINGS)
    run = (
        f"docs={options.docs} quick={options.quick} repair_timeout_s={options.repair_timeout_s:g} "
        f"neo4j_outage_s={options.neo4j_outage_s:g}"
    )
    backup = "qdrant server" if settings.qdrant_url else f"embedded qdrant, engine {settings.qdrant_engine}"
    return f"# engram fault suite\n# settings: {code}\n# backup: {backup}\n# run: {run}"


def row(result: ScenarioResult) -> tuple[str, ...]:
    return (
        result.scenario,
        str(result.sent),
        str(result.expected),
        str(result.lost),
        str(result.duplicated),
        "yes" if result.parity else "NO",
        "-" if result.repair_s is None else f"{result.repair_s:.1f}",
        result.detail,
    )


def table(results: Iterable[ScenarioResult]) -> str:
    rows = [COLUMNS, *(row(r) for r in results)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS) - 1)]
    lines = []
    for r in rows:
        cells = [
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(r, widths, strict=False))
        ]
        lines.append("  ".join([*cells, r[-1]]))
    return "\n".join(lines)


def json_line(result: ScenarioResult) -> str:
    return json.dumps(asdict(result), sort_keys=False)
