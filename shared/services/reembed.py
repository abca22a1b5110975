"""A model change as a migration: re-embed everything with the new model, then switch.

``ReembedPages`` runs in the write worker (the one process that may open an embedded Qdrant
folder): for a page of Memory ids it embeds with the *target* model whatever has no current next
vector, stores it beside the current one (``embedding_next``, guarded by the Memory's version),
and upserts the Memory into the target model's collection (version-guarded, payload naming the
new model). Progress lives on the nodes, so a page sent twice, or a run interrupted anywhere,
redoes only what is not done; a page of an older run is a no-op.

``Reembed`` is the operator's side (``engram reembed``): it starts or resumes the migration,
sends the pages of what is not done, waits, and switches: it marks the migration ``switching``
(writers of the old model then wait, searches answer 503), waits until no search can still be
using the old vectors, catches up what was written meanwhile, copies the next vectors in, swaps
the vector index if the dimension changes, and makes the store claim the new model. Every step is
idempotent, so an interrupted switch is finished by running it again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from shared.embedding.base import Embedder
from shared.errors import ConfigurationError, SearchTimeout
from shared.stores.base import EmbeddingTarget, MigrationState, MigrationStore, VectorPoint, VectorStores

log = logging.getLogger(__name__)

COPY_BATCH = 1000


@dataclass(frozen=True, slots=True)
class PageReport:
    stale: bool = False
    """The page belongs to an older run, or the migration is over: nothing was done."""
    reembedded: int = 0
    synced: int = 0
    superseded: int = 0
    """Memories rewritten while being re-embedded: a later page does them again."""


class ReembedPages:
    def __init__(
        self,
        store: MigrationStore,
        vectors: VectorStores,
        embedder_for: Callable[[EmbeddingTarget], Embedder],
    ) -> None:
        self._store = store
        self._vectors = vectors
        self._embedder_for = embedder_for

    def run(self, run: int, ids: Sequence[str]) -> PageReport:
        migration = self._store.migration()
        if migration is None or migration.run != run or migration.phase == "done":
            return PageReport(stale=True)
        target = migration.target
        rows = self._store.reembed_rows(ids)
        embed = [row for row in rows if not row.next_current(target)]
        vectors: dict[str, tuple[int, list[float]]] = {}
        if embed:
            embedder = self._embedder_for(target)
            if (embedder.model_name, embedder.dimension) != target.key:
                raise ConfigurationError(
                    f"the migration's target is {target.model} ({target.dimension} dimensions) but its "
                    f"embedder gives {embedder.model_name} ({embedder.dimension})"
                )
            embedded = embedder.embed([row.memory.content for row in embed])
            vectors = {
                row.memory.id: (row.memory.version, [float(x) for x in vector])
                for row, vector in zip(embed, embedded, strict=True)
            }
        stored = set(self._store.put_next_vectors(target, vectors)) if vectors else set()
        points: list[VectorPoint] = []
        for row in rows:
            if row.memory.id in stored:
                vector = vectors[row.memory.id][1]
            elif row.next_current(target) and not row.next_synced and row.next_vector is not None:
                vector = row.next_vector
            else:
                continue
            payload = row.memory.model_copy(
                update={"embedding_model": target.model, "embedding_dim": target.dimension}
            ).payload()
            points.append(VectorPoint(row.memory.id, vector, row.memory.version, payload))
        if points:
            self._vectors(target.model, target.dimension).upsert(points)
            self._store.mark_next_synced(target, {p.id: p.version for p in points})
        if stored:
            self._store.record_page(run, len(stored))
        return PageReport(reembedded=len(stored), synced=len(points), superseded=len(vectors) - len(stored))


@dataclass(frozen=True, slots=True)
class Progress:
    migration: MigrationState
    total: int
    done: int

    @property
    def complete(self) -> bool:
        return self.done >= self.total


SendPage = Callable[[int, list[str]], None]
ShowProgress = Callable[[Progress], None]


class Reembed:
    def __init__(
        self,
        store: MigrationStore,
        send_page: SendPage,
        clock: Callable[[], datetime],
        page_size: int,
        switch_grace_s: float,
        poll_s: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._store = store
        self._send_page = send_page
        self._clock = clock
        self._page = page_size
        self._grace_s = switch_grace_s
        self._poll_s = poll_s
        self._sleep = sleep

    def start(self, target: EmbeddingTarget) -> MigrationState:
        """Starts a migration to ``target``, or resumes the one under way (its next run)."""
        claim = self._store.stored_model()
        if claim is None:
            raise ConfigurationError("the store holds no vectors yet: configure the new model and ingest")
        current = self._store.migration()
        if current is not None and current.phase != "done":
            if current.target.key != target.key:
                raise ConfigurationError(
                    f"a migration to {current.target.model} ({current.target.dimension}) is under way; "
                    f"finish it (configure that model and run engram reembed) before another"
                )
            return self._store.start_migration(current.source, current.target, self._clock())
        if claim == target.key:
            raise ConfigurationError(
                f"the store already holds {target.model} ({target.dimension} dimensions): "
                "set ENGRAM_EMBEDDING_MODEL (and backend, dimension) to the new model first"
            )
        return self._store.start_migration(claim, target, self._clock())

    def progress(self) -> Progress | None:
        migration = self._store.migration()
        if migration is None:
            return None
        total, done = self._store.reembed_progress(migration.target)
        return Progress(migration, total, done)

    def send_pages(self, migration: MigrationState) -> int:
        """Sends a task per page of what is not done, in id order; returns how many."""
        after: str | None = None
        pages = 0
        while True:
            ids = self._store.reembed_pending(migration.target, after, self._page)
            if not ids:
                return pages
            self._send_page(migration.run, ids)
            pages += 1
            after = ids[-1]

    def wait(self, show: ShowProgress, deadline: float) -> Progress:
        """Until every Memory is done; raises ``SearchTimeout`` past ``deadline`` (monotonic)."""
        while True:
            progress = self.progress()
            assert progress is not None
            show(progress)
            if progress.complete:
                return progress
            if time.monotonic() > deadline:
                raise SearchTimeout(
                    f"re-embedding not finished ({progress.done}/{progress.total}): is the write worker "
                    "running? Run engram reembed again to resume"
                )
            self._sleep(self._poll_s)

    def run(self, target: EmbeddingTarget, show: ShowProgress, timeout_s: float) -> MigrationState:
        """Start or resume, re-embed everything, switch. Returns the migration, done."""
        deadline = time.monotonic() + timeout_s
        migration = self.start(target)
        if migration.phase == "running":
            self.send_pages(migration)
            self.wait(show, deadline)
        return self.switch(show, deadline)

    def switch(self, show: ShowProgress, deadline: float) -> MigrationState:
        migration = self._store.migration()
        assert migration is not None
        target = migration.target
        if migration.phase == "running":
            self._store.set_phase("switching", self._clock())
            # A search that checked the model just before is over after this, and every query
            # worker has looked again: none compares the vectors about to change.
            self._sleep(self._grace_s)
        while True:
            # Catch up what old-model writers wrote before the switch began.
            self.send_pages(migration)
            self.wait(show, deadline)
            self._store.drop_vector_index_unless(target.dimension)
            while self._store.copy_next_vectors(target, COPY_BATCH):
                pass
            if self._store.not_switched(target) == 0:
                break
            log.info("memories written during the switch are re-embedded first")
        self._store.ensure_vector_index(target.dimension)
        self._store.finish_switch(target, self._clock())
        done = self._store.migration()
        assert done is not None
        return done
