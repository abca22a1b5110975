"""A Reconciler over fakes with its stores, clock and syncer, as the reconcile suites build it. A
helper module, so no test module imports another."""

from __future__ import annotations

from datetime import timedelta

from shared.models import StagedDocument
from shared.services.guard import PrimaryGuard
from shared.services.reconcile import Reconciler, ReconcileReport
from shared.services.sync import Syncer
from tests.unit.fakes import DIM, MODEL, Clock, FakeGraph, FakeVectors, FakeVectorSpace, write_of

GRACE_S = 60
GRACE_S_DELTA = timedelta(seconds=GRACE_S)


class Stores:
    def __init__(
        self,
        batch_size: int = 10,
        scan_page: int = 100,
        scan_budget: int | None = None,
        mass_delete_min: int = 100,
        scroll_page: int | None = None,
    ) -> None:
        self.clock = Clock()
        self.graph = FakeGraph(self.clock)
        self.space = FakeVectorSpace()
        self.syncer = Syncer(self.graph, self.space, self.clock)
        self.reconciler = Reconciler(
            self.graph,
            self.space,
            self.syncer,
            self.clock,
            GRACE_S,
            batch_size,
            scan_page,
            guard=PrimaryGuard(self.graph, 0.5),
            mass_delete_min=mass_delete_min,
            scan_budget=scan_budget,
            scroll_page=scroll_page,
        )
        self.graph.ensure_schema(MODEL, DIM)

    @property
    def vectors(self) -> FakeVectors:
        return self.space(MODEL, DIM)

    def write(self, doc: StagedDocument, sync: bool = True, model: str = MODEL) -> list[str]:
        outcome = self.graph.write_documents([write_of(doc, model)])
        ids = outcome.memory_ids + outcome.removed_ids
        if sync:
            self.syncer.sync(ids)
        return ids

    def run(self, dry_run: bool = False) -> ReconcileReport:
        return self.reconciler.run(dry_run=dry_run, scheduled=True)
