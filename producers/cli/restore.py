"""``engram restore`` and ``engram backup`` (registered by ``producers.cli``).

``engram restore`` rebuilds Neo4j from Qdrant (the default), or Qdrant from Neo4j (``--to
qdrant``; ``--migrate-payloads`` is the same pass, for points written before their payload
carried the document's fields). It runs in the worker of the ``reconcile`` queue, the process
that may open an embedded Qdrant folder; this command sends it, draws its progress from the
checkpoint it keeps in Neo4j, and prints its report. ``--from FILE`` restores Neo4j from a file
``engram backup`` wrote, in this process (no Qdrant needed).

``engram backup`` writes the primary to a file (an online export, see shared/services/backup.py)
and, with ``--qdrant``, takes Qdrant's own backup: a snapshot on a server, a copy of the
embedded folder (only while no process holds it: stop the write worker first).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import celery.exceptions

from producers.cli.common import identifier
from producers.client import EngramClient
from shared.container import Container
from shared.errors import InvalidInput, ServiceUnavailable
from shared.services.backup import FileSource, export
from shared.services.restore import RestoreReport
from shared.settings import get_settings

EXIT_PARTIAL = 1
STALL_S = 600.0
"""No checkpoint written for this long: the restore's worker is taken for dead."""


def register(commands: Any) -> None:
    restore = commands.add_parser(
        "restore", help="rebuild Neo4j from Qdrant (or a backup file), or Qdrant from Neo4j (--to qdrant)"
    )
    restore.add_argument("--to", choices=("neo4j", "qdrant"), default="neo4j", help="the store rebuilt")
    restore.add_argument("--from", dest="from_file", type=Path, help="a file engram backup wrote")
    restore.add_argument("--tenant", help="only this tenant's memories")
    restore.add_argument("--dry-run", action="store_true", help="only count what would be restored")
    restore.add_argument("--fresh", action="store_true", help="start over rather than resume")
    restore.add_argument(
        "--migrate-payloads",
        action="store_true",
        help="rewrite every point's payload from Neo4j (points older than the document fields)",
    )
    restore.add_argument("--model", help="the collection's model (default: Neo4j's, else the configured)")
    restore.add_argument("--dimension", type=int)
    restore.add_argument("--no-wait", action="store_true", help="return once sent")
    restore.add_argument("--json", action="store_true", help="print the report as JSON only")
    restore.set_defaults(run=run_restore)

    backup = commands.add_parser("backup", help="export Neo4j to a file; with --qdrant, Qdrant's too")
    backup.add_argument("folder", type=Path, help="where the backup goes (made if absent)")
    backup.add_argument("--tenant", help="only this tenant's memories")
    backup.add_argument("--qdrant", action="store_true", help="also a snapshot or a folder copy of Qdrant")
    backup.set_defaults(run=run_backup)


def run_restore(args: argparse.Namespace) -> int:
    tenant = _tenant(args.tenant)
    to = "qdrant" if args.migrate_payloads else args.to
    if args.from_file is not None:
        if to != "neo4j":
            raise InvalidInput("--from restores Neo4j; it cannot go with --to qdrant")
        return _restore_file(args, tenant)
    client = EngramClient()
    try:
        options = {
            "to": to,
            "tenant": tenant,
            "dry_run": args.dry_run,
            "fresh": args.fresh,
            "model": args.model,
            "dimension": args.dimension,
        }
        started = time.monotonic()
        result = client.start_restore(**options)
        if args.no_wait:
            print(json.dumps({"task_id": result.id, "to": to}))
            return 0
        bar = _Bar(args.json)
        last, moved_at = None, time.monotonic()
        while True:
            try:
                answer: dict[str, Any] = result.get(timeout=1.0, propagate=True)
                break
            except celery.exceptions.TimeoutError:
                state = client.restore_state(to)
                if state and not args.dry_run and state.get("state") == "running":
                    report = state.get("report") or {}
                    done = int(report.get("restored", 0)) + int(report.get("skipped_newer", 0))
                    bar.show(done, state.get("total"))
                seen = None if state is None else state.get("updated_at")
                if seen != last:
                    last, moved_at = seen, time.monotonic()
                elif time.monotonic() - moved_at > STALL_S:
                    bar.close()
                    raise ServiceUnavailable(
                        "workers",
                        f"the restore made no progress for {STALL_S:g} s (its worker may have died)",
                        "run engram restore again: it goes on from its checkpoint",
                    ) from None
        bar.close()
        report = RestoreReport.model_validate(answer)
        _print_report(report, args.json, time.monotonic() - started)
    finally:
        client.close()  # its Redis and Neo4j drivers
    return EXIT_PARTIAL if report.error or report.unreadable_count or report.failed else 0


def _restore_file(args: argparse.Namespace, tenant: str | None) -> int:
    container = Container(get_settings())
    try:
        source = FileSource(args.from_file)
        restorer = container.restorer
        bar = _Bar(args.json)
        started = time.monotonic()
        # One restore at a time, this one in this process (shared/services/restore_lock.py).
        lock = container.restore_lock()
        with contextlib.nullcontext() if args.dry_run else lock.held(uuid.uuid4().hex):
            report = restorer.to_neo4j(
                source,
                tenant=tenant,
                dry_run=args.dry_run,
                fresh=args.fresh,
                progress=lambda r, total: bar.show(r.restored + r.skipped_newer, total),
            )
        bar.close()
        _print_report(report, args.json, time.monotonic() - started)
        if not args.dry_run and not args.json:
            print("  restored Memories are pending: the reconciler syncs them to Qdrant (engram reconcile)")
    finally:
        container.close()
    return EXIT_PARTIAL if report.unreadable_count else 0


def run_backup(args: argparse.Namespace) -> int:
    tenant = _tenant(args.tenant)
    folder: Path = args.folder
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    container = Container(get_settings())
    try:
        if args.qdrant:  # first: a folder in use refuses at once, before a long export
            print(container.back_up_vectors(folder, stamp))
        graph = container.graph
        path = folder / f"neo4j-{stamp}.jsonl"
        started = time.monotonic()
        store_id = graph.identity().store_id
        # The API keys go with a whole backup (hashes and sealed secrets, as Neo4j holds them).
        keys = container.key_rows.key_rows() if tenant is None else []
        count = export(
            graph,
            path,
            store_id,
            tenant,
            progress=lambda n: _progress_line(f"exported {n} memories"),
            keys=keys,
        )
        print(f"\rNeo4j: {count} memories to {path} in {time.monotonic() - started:.1f} s", flush=True)
        print(f"  restore it with: engram restore --from {path}")
    finally:
        container.close()
    return 0


def _print_report(report: RestoreReport, as_json: bool, seconds: float) -> None:
    if as_json:
        print(report.model_dump_json(indent=2))
        return
    verb = "would restore" if report.dry_run else "restored"
    what = (
        f"{report.restored} memories of {report.documents} documents"
        if report.to == "neo4j"
        else (f"{report.restored} memories")
    )
    print(f"{verb} into {report.to} from {report.source}: {what} in {seconds:.1f} s")
    if report.resumed_after:
        print(f"  resumed after document {report.resumed_after}")
    print(
        f"  points looked at {report.points}; synced {report.synced}; skipped (Neo4j newer) "
        f"{report.skipped_newer}; older versions in the backup {report.superseded_points}; "
        f"incomplete documents {report.incomplete_documents}; unreadable {report.unreadable_count}"
    )
    for bad in report.unreadable[:20]:
        print(f"  unreadable {bad.id}: {bad.reason}")
    if report.error:
        print(f"  stopped: {report.error} (run it again: it goes on from its checkpoint)")
    if report.keys:
        print(f"  API keys brought back: {report.keys} (revoked ones stay revoked)")
    if report.store_id and not report.dry_run:
        print(f"  store id {report.store_id}; `engram reconcile` should now find the stores in parity")


class _Bar:
    """A progress line on a terminal; nothing when piped or printing JSON."""

    def __init__(self, quiet: bool) -> None:
        self._on = sys.stderr.isatty() and not quiet
        self._started = time.monotonic()

    def show(self, done: int, total: Any) -> None:
        if not self._on:
            return
        total = int(total or 0)
        share = done / total if total else 0.0
        filled = int(share * 30)
        rate = done / max(time.monotonic() - self._started, 1e-6)
        line = f"\r[{'#' * filled}{'.' * (30 - filled)}] {done}/{total} memories, {rate:.0f}/s"
        print(line, end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._on:
            print(file=sys.stderr)


def _progress_line(text: str) -> None:
    if sys.stdout.isatty():
        print(f"\r{text}", end="", flush=True)


def _tenant(value: str | None) -> str | None:
    return None if value is None else identifier(value)
