"""The reconciler: a drift scan of the whole store (a dry run), and the repair of failed syncs.

Both run through the reconcile queue, as ``engram reconcile`` does, so they measure the worker
and whichever backup store it is configured with. For the repair, up to ``FAILED`` Memories are
marked ``failed`` with their retry due (as a backup outage leaves them); the pass that re-syncs
them is timed and every one must be ``synced`` after it.
"""

from __future__ import annotations

import time
from typing import Any, LiteralString

from producers.client import EngramClient
from shared.container import Container

FAILED = 10_000
MARK_FAILED: LiteralString = """
MATCH (m:Memory) WHERE m.vector_sync = 'synced' AND m.user_id STARTS WITH $prefix
WITH m LIMIT $limit
SET m.vector_sync = 'failed', m.vector_sync_error = 'bench: backup write refused',
    m.vector_sync_attempts = 1, m.vector_sync_retry_at = datetime() - duration('PT1M')
RETURN count(m) AS n
"""
STILL_FAILED: LiteralString = """
MATCH (m:Memory) WHERE m.user_id STARTS WITH $prefix AND m.vector_sync <> 'synced' RETURN count(m) AS n
"""


def scan(client: EngramClient) -> dict[str, Any]:
    started = time.perf_counter()
    report = client.reconcile(dry_run=True, timeout_s=1800.0)
    return {"seconds": time.perf_counter() - started, "report": report}


def repair(client: EngramClient, container: Container, prefix: str) -> dict[str, Any]:
    graph = container.graph
    marked = int(graph.write_rows(MARK_FAILED, prefix=prefix, limit=FAILED)[0]["n"])
    started = time.perf_counter()
    client.reconcile(timeout_s=1800.0)
    seconds = time.perf_counter() - started
    left = int(graph.read_rows(STILL_FAILED, prefix=prefix)[0]["n"])
    return {"failed": marked, "seconds": seconds, "left_unsynced": left}
