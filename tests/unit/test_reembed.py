"""A model migration over fakes: pages, resuming, the switch, and who is refused when."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import pytest

from shared.errors import ConfigurationError, ModelMigration, TransientError
from shared.models import Memory
from shared.services.reembed import Reembed, ReembedPages
from shared.stores.base import (
    EmbeddingTarget,
    MigrationPhase,
    MigrationState,
    ModelClaim,
    ReembedRow,
)
from tests.unit.fakes import DIM, MODEL, T0, Clock, FakeEmbedder, FakeVectorSpace

NEW = EmbeddingTarget(model="new-model", dimension=DIM)


@dataclass
class Node:
    memory: Memory
    embedding: list[float]
    next_vector: list[float] | None = None
    next_model: tuple[str, int] | None = None
    next_version: int | None = None
    next_synced: bool = False
    vector_sync: str = "synced"


class FakeMigrationStore:
    """``MigrationStore`` in memory, as the Cypher of ``neo4j/reembed_queries.py`` behaves."""

    def __init__(self, count: int) -> None:
        self.claim: tuple[str, int] | None = (MODEL, DIM)
        self.state: MigrationState | None = None
        self.index_dimension = DIM
        self.nodes = {
            f"m{i:03d}": Node(
                Memory(
                    id=f"m{i:03d}",
                    document_id="d",
                    user_id="alice",
                    chunk_index=i,
                    content=f"text {i}",
                    key=f"text {i}",
                    content_hash=f"h{i}",
                    token_count=2,
                    created_at=T0,
                    version=1,
                    embedding_model=MODEL,
                    embedding_dim=DIM,
                ),
                [1.0, 0.0, 0.0],
            )
            for i in range(count)
        }

    def rewrite(self, memory_id: str, version: int) -> None:
        """An old-model writer's new version of a Memory."""
        node = self.nodes[memory_id]
        node.memory = node.memory.model_copy(update={"version": version})

    def _done(self, node: Node, target: EmbeddingTarget) -> bool:
        current = node.next_model == target.key and node.next_version == node.memory.version
        switched = (node.memory.embedding_model, node.memory.embedding_dim) == target.key
        return (current and node.next_synced) or (switched and node.next_vector is None)

    def stored_model(self) -> tuple[str, int] | None:
        return self.claim

    def migration(self) -> MigrationState | None:
        return self.state

    def start_migration(
        self, source: tuple[str, int], target: EmbeddingTarget, now: datetime
    ) -> MigrationState:
        if self.state is not None and self.state.phase != "done" and self.state.target.key == target.key:
            self.state = replace(self.state, run=self.state.run + 1, run_pages=0, run_reembedded=0)
        else:
            self.state = MigrationState(source=source, target=target, phase="running", run=1, started_at=now)
        return self.state

    def reembed_pending(self, target: EmbeddingTarget, after: str | None, limit: int) -> list[str]:
        ids = sorted(
            i for i, n in self.nodes.items() if (after is None or i > after) and not self._done(n, target)
        )
        return ids[:limit]

    def reembed_progress(self, target: EmbeddingTarget) -> tuple[int, int]:
        return len(self.nodes), sum(self._done(n, target) for n in self.nodes.values())

    def reembed_rows(self, ids: Sequence[str]) -> list[ReembedRow]:
        return [
            ReembedRow(n.memory, n.next_vector, n.next_model, n.next_version, n.next_synced)
            for n in (self.nodes.get(i) for i in ids)
            if n is not None
        ]

    def put_next_vectors(
        self, target: EmbeddingTarget, vectors: Mapping[str, tuple[int, list[float]]]
    ) -> list[str]:
        stored = []
        for memory_id, (version, vector) in vectors.items():
            node = self.nodes.get(memory_id)
            if node is not None and node.memory.version == version:
                node.next_vector, node.next_model, node.next_version = vector, target.key, version
                node.next_synced = False
                stored.append(memory_id)
        return stored

    def mark_next_synced(self, target: EmbeddingTarget, versions: Mapping[str, int]) -> None:
        for memory_id, version in versions.items():
            node = self.nodes[memory_id]
            if node.next_version == version and node.next_model == target.key:
                node.next_synced = True

    def record_page(self, run: int, reembedded: int) -> None:
        assert self.state is not None
        this_run = int(self.state.run == run)
        self.state = replace(
            self.state,
            pages=self.state.pages + 1,
            reembedded=self.state.reembedded + reembedded,
            run_pages=self.state.run_pages + this_run,
            run_reembedded=self.state.run_reembedded + this_run * reembedded,
        )

    def set_phase(self, phase: MigrationPhase, now: datetime) -> None:
        assert self.state is not None
        self.state = replace(self.state, phase=phase)

    def drop_vector_index_unless(self, dimension: int) -> None:
        if self.index_dimension != dimension:
            self.index_dimension = 0

    def copy_next_vectors(self, target: EmbeddingTarget, limit: int) -> int:
        ready = [
            n
            for n in self.nodes.values()
            if n.next_model == target.key and n.next_version == n.memory.version and n.next_vector is not None
        ][:limit]
        for n in ready:
            assert n.next_vector is not None
            n.embedding = n.next_vector
            n.memory = n.memory.model_copy(
                update={"embedding_model": target.model, "embedding_dim": target.dimension}
            )
            n.vector_sync = "synced" if n.next_synced else "pending"
            n.next_vector = n.next_model = n.next_version = None
            n.next_synced = False
        return len(ready)

    def not_switched(self, target: EmbeddingTarget) -> int:
        return sum(
            (n.memory.embedding_model, n.memory.embedding_dim) != target.key for n in self.nodes.values()
        )

    def ensure_vector_index(self, dimension: int) -> None:
        self.index_dimension = dimension

    def finish_switch(self, target: EmbeddingTarget, now: datetime) -> None:
        assert self.state is not None
        self.claim = target.key
        self.state = replace(self.state, phase="done", switched_at=now)

    def forget_source_model(self, now: datetime) -> None:
        pass


class Migration:
    def __init__(self, count: int = 10, page_size: int = 3) -> None:
        self.clock = Clock()
        self.store = FakeMigrationStore(count)
        self.space = FakeVectorSpace()
        self.embedder = FakeEmbedder(NEW.model, NEW.dimension)
        self.pages = ReembedPages(self.store, self.space, lambda target: self.embedder)
        self.sent: list[tuple[int, list[str]]] = []
        self.deliver = True
        self.sleeps: list[float] = []
        self.reembed = Reembed(
            self.store,
            self.send,
            self.clock,
            page_size=page_size,
            switch_grace_s=12.0,
            sleep=self.sleeps.append,
        )

    def send(self, run: int, ids: list[str]) -> None:
        """The write queue: pages run at once while the worker is up, else wait in the queue."""
        self.sent.append((run, ids))
        if self.deliver:
            self.pages.run(run, ids)

    def embedded(self) -> list[str]:
        return [text for call in self.embedder.calls for text in call]


def test_pages_store_next_vectors_and_the_new_collection_while_the_old_model_stays_current() -> None:
    m = Migration(count=5)
    state = m.reembed.start(NEW)

    report = m.pages.run(state.run, ["m000", "m001"])

    assert (report.reembedded, report.synced, report.stale) == (2, 2, False)
    node = m.store.nodes["m000"]
    assert node.memory.embedding_model == MODEL and node.embedding == [1.0, 0.0, 0.0]
    assert node.next_model == NEW.key and node.next_version == 1 and node.next_synced
    points = m.space(NEW.model, NEW.dimension).points
    assert set(points) == {"m000", "m001"}
    assert points["m000"].payload["embedding_model"] == NEW.model and points["m000"].version == 1
    # the same page again embeds nothing
    assert m.pages.run(state.run, ["m000", "m001"]).reembedded == 0
    assert len(m.embedded()) == 2


def test_a_page_of_an_older_run_is_a_no_op() -> None:
    m = Migration(count=3)
    first = m.reembed.start(NEW)
    m.reembed.start(NEW)

    assert m.pages.run(first.run, ["m000"]).stale
    assert m.embedded() == []


def test_a_memory_rewritten_after_its_next_vector_is_done_again() -> None:
    m = Migration(count=3)
    state = m.reembed.start(NEW)
    m.pages.run(state.run, ["m000", "m001", "m002"])

    m.store.rewrite("m001", 2)

    assert m.store.reembed_pending(NEW, None, 10) == ["m001"]
    m.pages.run(state.run, ["m001"])
    assert m.space(NEW.model, NEW.dimension).points["m001"].version == 2
    assert m.store.reembed_progress(NEW) == (3, 3)


def test_an_interrupted_migration_resumes_without_redoing_finished_pages_and_switches() -> None:
    # Given a migration whose write worker stopped after two of four pages
    m = Migration(count=10, page_size=3)
    state = m.reembed.start(NEW)
    m.deliver = False
    sent = m.reembed.send_pages(state)
    assert sent == 4
    for run, ids in m.sent[:2]:
        m.pages.run(run, ids)
    assert m.store.reembed_progress(NEW) == (10, 6)
    m.sent.clear()
    m.deliver = True

    # When engram reembed runs again
    done = m.reembed.run(NEW, lambda _: None, timeout_s=60)

    # Then only the last two pages were sent and embedded, each memory once, and it switched
    assert [ids for _, ids in m.sent] == [["m006", "m007", "m008"], ["m009"]]
    assert len(m.embedded()) == len(set(m.embedded())) == 10
    assert (done.phase, done.run, done.run_pages, done.run_reembedded, done.reembedded) == (
        "done",
        2,
        2,
        4,
        10,
    )
    assert m.store.claim == NEW.key
    assert {n.memory.embedding_model for n in m.store.nodes.values()} == {NEW.model}
    assert {n.vector_sync for n in m.store.nodes.values()} == {"synced"}
    assert all(n.next_vector is None for n in m.store.nodes.values())
    # the switch waited for searches and query workers to see it
    assert m.sleeps == [12.0]


def test_a_memory_written_by_the_old_model_during_the_switch_is_re_embedded_before_the_copy() -> None:
    m = Migration(count=4)
    m.reembed.start(NEW)
    m.reembed.send_pages(m.store.migration())  # type: ignore[arg-type]
    # a write of the old model that committed as the switch began
    m.store.rewrite("m002", 5)

    done = m.reembed.switch(lambda _: None, deadline=float("inf"))

    assert done.phase == "done"
    node = m.store.nodes["m002"]
    assert (node.memory.embedding_model, node.memory.version) == (NEW.model, 5)
    assert m.space(NEW.model, NEW.dimension).points["m002"].version == 5


def test_a_different_dimension_swaps_the_vector_index() -> None:
    m = Migration(count=2)
    target = EmbeddingTarget(model="wide", dimension=2)
    m.embedder = FakeEmbedder("wide", 2)

    m.reembed.run(target, lambda _: None, timeout_s=60)

    assert m.store.index_dimension == 2
    assert {len(n.embedding) for n in m.store.nodes.values()} == {2}


def test_starting_refuses_the_model_the_store_holds_and_a_second_target() -> None:
    m = Migration(count=1)
    with pytest.raises(ConfigurationError, match="already holds"):
        m.reembed.start(EmbeddingTarget(model=MODEL, dimension=DIM))
    m.reembed.start(NEW)
    with pytest.raises(ConfigurationError, match="under way"):
        m.reembed.start(EmbeddingTarget(model="third", dimension=DIM))


OLD = (MODEL, DIM)


def test_writers_of_the_old_model_wait_while_switching_and_after_it() -> None:
    running = ModelClaim(OLD, "running", OLD, NEW.key)
    switching = replace(running, phase="switching")
    done = ModelClaim(NEW.key, "done", OLD, NEW.key)

    assert running.refuse_write(*OLD) is None
    assert isinstance(switching.refuse_write(*OLD), ModelMigration)
    assert isinstance(done.refuse_write(*OLD), ModelMigration)
    assert "restart this worker" in str(done.refuse_write(*OLD))
    # a worker started early with the new model waits too; a transient error, retried
    assert isinstance(running.refuse_write(*NEW.key), TransientError)
    assert done.refuse_write(*NEW.key) is None
    # a third model is a configuration error
    assert isinstance(running.refuse_write("third", DIM), ConfigurationError)
    assert isinstance(ModelClaim(OLD).refuse_write("third", DIM), ConfigurationError)


def test_searches_never_compare_two_models() -> None:
    running = ModelClaim(OLD, "running", OLD, NEW.key)

    assert running.refuse_search(*OLD) is None
    refused = running.refuse_search(*NEW.key)
    assert refused is not None and f"restart the query worker with model {MODEL}" in str(refused)
    assert replace(running, phase="switching").refuse_search(*OLD) is not None
    assert ModelClaim(NEW.key, "done", OLD, NEW.key).refuse_search(*OLD) is not None
    assert ModelClaim(None).refuse_search(*OLD) is None
