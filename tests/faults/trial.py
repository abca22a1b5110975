"""One scenario's run: send documents through the producer path, wait, reconcile once, check parity.

A scenario does its own fault in between; the steps before and after are the same for all of them
and live here. Every wait is bounded, so a scenario that cannot recover reports what it lost
instead of hanging.
"""

from __future__ import annotations

import math
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from celery import Celery
from celery.signals import after_task_publish

from producers.client import EngramClient
from shared.ids import document_key
from shared.models import DocumentIn, IngestAccepted
from tests.faults import corpus
from tests.faults.parity import check
from tests.faults.stack import FaultStack, wait_for
from workers.app import CHUNK_TASK, make_app


@dataclass(frozen=True, slots=True)
class Options:
    docs: int = 600
    quick: bool = False
    repair_timeout_s: float = 240.0  # bound of the wait for the pipeline to finish after the fault
    reconcile_timeout_s: float = 180.0
    neo4j_outage_s: float = 300.0
    seed: int | None = None  # the soak's schedule; drawn at random when not given
    soak_minutes: float | None = None  # the soak's length (10; 1.5 quick)


@dataclass(frozen=True, slots=True)
class ScenarioResult:
    scenario: str
    sent: int  # documents sent, repeats included
    expected: int  # Memories both stores must hold
    lost: int
    duplicated: int
    parity: bool
    repair_s: float | None  # fault undone → parity; None when parity was not reached
    stale: int = 0
    unsynced: int = 0
    detail: str = ""


def version_of(accepted: IngestAccepted) -> int | None:
    """The version the producer fixed for an ingestion, once ingestions carry one."""
    version = getattr(accepted, "version", None)
    return int(version) if isinstance(version, int) else None


def stack_app(stack: FaultStack) -> Celery:
    """The Celery app of workers.app, pointed at the fault stack's Redis."""
    return make_app(stack.settings)


class Context:
    """What every scenario shares: the stack, a producer client bound to it, the options."""

    def __init__(self, stack: FaultStack, options: Options) -> None:
        self.stack = stack
        self.options = options
        self.app = stack_app(stack)
        self.chunker = corpus.make_chunker(stack.settings)
        self.client = self.new_client()

    def new_client(self) -> EngramClient:
        return EngramClient(self.stack.settings, app=self.app)

    def close(self) -> None:
        self.client.close()


@contextmanager
def opened(stack: FaultStack, options: Options) -> Iterator[Context]:
    """The stack opened and a Context over it, for a test module; both closed on leaving, passed
    or failed, the stack even half-opened."""
    try:
        stack.open()
        context = Context(stack, options)
        try:
            yield context
        finally:
            context.close()
    finally:
        stack.close()


@dataclass(frozen=True, slots=True)
class Published:
    task_id: str
    args: tuple[Any, ...]


@contextmanager
def recording_chunk_tasks() -> Iterator[list[Published]]:
    """The ingest task messages this process publishes, as sent: to deliver one again by hand."""
    published: list[Published] = []

    def record(sender: Any = None, body: Any = None, headers: Any = None, **_: Any) -> None:
        if sender == CHUNK_TASK and headers:
            published.append(Published(str(headers["id"]), tuple(body[0])))

    after_task_publish.connect(record, weak=False)
    try:
        yield published
    finally:
        after_task_publish.disconnect(record)


class Trial:
    def __init__(self, context: Context, scenario: str) -> None:
        self.context = context
        self.stack = context.stack
        self.options = context.options
        self.scenario = scenario
        self.user_id = f"{scenario}-{uuid.uuid4().hex[:8]}"
        self.expectation = corpus.Expectation(self.user_id, context.chunker)
        self.sent = 0
        self.sent_ids: set[str] = set()
        self.notes: list[str] = []
        self.undone_at: float | None = None
        self._versions: dict[str, int] = {}

    # Sending.

    @property
    def batch(self) -> int:
        """Documents per ingest task: a run is several batches, so "mid-run" means something."""
        return max(4, math.ceil(self.options.docs / 5))

    def documents(self, count: int | None = None, revision: int = 0, start: int = 0) -> list[DocumentIn]:
        return corpus.documents(self.user_id, self.options.docs if count is None else count, revision, start)

    def ingest(
        self, docs: list[DocumentIn], client: EngramClient | None = None, batch: int | None = None
    ) -> IngestAccepted:
        accepted = (client or self.context.client).ingest(docs, batch_documents=batch or self.batch)
        # A document found stored as sent is not written again: what was expected of it stays.
        unchanged = set(getattr(accepted, "unchanged", ()))
        self.accepted([d for d in docs if d.document_id not in unchanged], version_of(accepted))
        return accepted

    def accepted(self, docs: list[DocumentIn], version: int | None) -> None:
        """Records documents as sent; the highest version of each is the one that must remain."""
        self.sent += len(docs)
        self.sent_ids.update(d.document_id for d in docs)
        newer = [d for d in docs if version is None or version >= self._versions.get(d.document_id, version)]
        if version is not None:
            self._versions.update((d.document_id, version) for d in newer)
        self.expectation.accepted(newer, version)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def undone(self) -> None:
        """The fault is undone: repair time counts from here."""
        self.undone_at = time.monotonic()

    # Watching.

    def memories_in_neo4j(self) -> int:
        records, _, _ = self.stack.neo4j.execute_query(
            "MATCH (m:Memory {user_id: $u}) RETURN count(m) AS n", u=self.user_id
        )
        return int(records[0]["n"])

    def wait_first_write(self, timeout_s: float = 180) -> bool:
        """Until the first batch is committed in Neo4j: its Qdrant push is under way."""
        if wait_for(lambda: self.memories_in_neo4j() > 0, timeout_s, 0.05):
            return True
        self.note(f"no write landed in {timeout_s:g} s")
        return False

    def settle(self) -> int:
        """Until every document is done or failed and nothing is in flight, or nothing has been in
        flight for 3 s, within the bound. A document's state alone is not enough: an older batch
        finishing marks a newer ingestion of the same document done while it is still queued."""
        keys = [(document_key(self.user_id, d), self._versions.get(d, 0)) for d in sorted(self.sent_ids)]
        deadline = time.monotonic() + self.options.repair_timeout_s
        idle_since: float | None = None
        unfinished, backlog = len(keys), -1
        while True:
            try:
                for name in self.stack.revive():
                    self.note(f"worker {name} exited and was restarted, as its supervisor would")
                states = self.context.client.states(keys)
                backlog = self.stack.broker_backlog()
            except Exception:
                states, backlog = None, -1
            if states is not None:
                unfinished = len(keys) - states["done"] - states["failed"]
                if unfinished == 0 and backlog == 0:
                    if states["failed"]:
                        self.note(f"{states['failed']} documents failed ({self._failure_reasons()})")
                    return 0
            now = time.monotonic()
            idle_since = (idle_since or now) if backlog == 0 else None
            if idle_since is not None and now - idle_since >= 3:
                self.note(f"{unfinished} documents never finished, nothing in flight")
                return unfinished
            if now >= deadline:
                self.note(f"{unfinished} documents unfinished after {self.options.repair_timeout_s:g} s")
                return unfinished
            time.sleep(0.5)

    def _failure_reasons(self) -> str:
        """The distinct reasons the failed documents were given, with how many had each."""
        statuses = (self.context.client.status(self.user_id, d) for d in sorted(self.sent_ids))
        reasons = Counter(s.error or "no reason" for s in statuses if s.state == "failed")
        return "; ".join(f"{n}x {reason[:200]}" for reason, n in reasons.most_common(3))

    def reconcile(self, client: EngramClient | None = None) -> dict[str, Any]:
        """The one reconcile pass a scenario gets."""
        try:
            report = (client or self.context.client).reconcile(timeout_s=self.options.reconcile_timeout_s)
        except Exception as exc:
            self.note(f"reconcile: {type(exc).__name__}: {exc}")
            return {}
        if report.get("error"):
            self.note(f"reconcile error: {str(report['error'])[:120]}")
        counts = {k: v for k, v in report.items() if isinstance(v, int) and not isinstance(v, bool) and v}
        self.note("reconcile " + (" ".join(f"{k}={v}" for k, v in counts.items()) or "found nothing"))
        return report

    # Ending.

    def finish(self, reconcile: bool = True) -> ScenarioResult:
        if self.undone_at is None:
            self.undone()
        assert self.undone_at is not None
        unfinished = self.settle()
        if reconcile:
            if unfinished:  # no message left to finish them: the pass sends lost ones again after the grace
                time.sleep(self.stack.settings.redeliver_after_s)
            # The messages sent again (by this pass, or by the workers' own during the wait:
            # workers/redeliver.py) run through the pipeline, both stores written
            if self.reconcile().get("redelivered") or unfinished:
                self.settle()
        repaired_at = time.monotonic()
        expected = self.expectation.memories()
        try:
            parity = check(self.stack, self.user_id, expected, self.expectation.document_ids)
        except Exception as exc:
            self.note(f"parity check failed: {type(exc).__name__}: {exc}")
            return self.result(expected=len(expected), lost=len(expected), duplicated=0, parity=False)
        self.notes.insert(0, parity.describe())
        return self.result(
            expected=len(expected),
            lost=parity.lost,
            duplicated=parity.duplicated,
            parity=parity.ok,
            repair_s=round(repaired_at - self.undone_at, 1) if parity.ok else None,
            stale=parity.stale,
            unsynced=parity.unsynced,
        )

    def result(self, **fields: Any) -> ScenarioResult:
        return ScenarioResult(scenario=self.scenario, sent=self.sent, detail="; ".join(self.notes), **fields)
