"""What the write worker's threads share (its pool is threads) is made once, however many of them
ask for it first at the same moment: the graph's extractor (spaCy's loads a model), a
migration's embedder (a model, or an HTTP client) and the schema's claims guard."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from unittest import mock

import shared.graph.extractors as extractors
from shared.container import Container
from shared.settings import Settings
from shared.stores.base import EmbeddingTarget
from shared.stores.neo4j import Neo4jStore, schema_queries


def at_once(use: Callable[[], object], threads: int = 3) -> set[int]:
    """What ``use`` returned to each of ``threads`` threads let go together (its objects' ids)."""
    barrier = threading.Barrier(threads)
    got: list[int] = []

    def run() -> None:
        barrier.wait()
        got.append(id(use()))

    started = [threading.Thread(target=run) for _ in range(threads)]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join()
    return set(got)


def slowly(make: Callable[..., Any], made: list[int]) -> Callable[..., Any]:
    def slow(*args: Any) -> Any:
        made.append(1)
        time.sleep(0.05)  # a model loading: long enough for every thread to ask meanwhile
        return make(*args)

    return slow


def test_the_graph_writer_is_made_once_for_threads_asking_at_once(tmp_path: Any) -> None:
    made: list[int] = []
    settings = Settings(data_dir=tmp_path)
    with mock.patch.object(extractors, "make_extractor", slowly(extractors.make_extractor, made)):
        stores = [Neo4jStore(settings, driver=mock.Mock()) for _ in range(10)]
        handed = [at_once(lambda store=store: store.graph) for store in stores]  # type: ignore[misc]

    assert [len(writers) for writers in handed] == [1] * 10
    assert len(made) == 10


def test_a_migrations_embedder_is_made_once_for_threads_asking_at_once(tmp_path: Any) -> None:
    made: list[int] = []
    target = EmbeddingTarget(
        backend="local",
        model="m",
        dimension=8,
        url=None,
        max_tokens=256,
        tokenizer_path=None,
        local_model_path=None,
    )
    with mock.patch("shared.container.make_embedder", slowly(lambda _settings: object(), made)):
        containers = [Container(Settings(data_dir=tmp_path)) for _ in range(10)]
        handed = [at_once(lambda c=c: c.embedder_for(target)) for c in containers]  # type: ignore[misc]

    assert [len(embedders) for embedders in handed] == [1] * 10
    assert len(made) == 10


def test_the_claims_guard_runs_in_one_thread_at_a_time(tmp_path: Any) -> None:
    # Given a write thread meeting a wiped primary again and again (the schema made anew each
    # time) while a reconcile thread records its passes (each a claim write, guarded)
    store = Neo4jStore(Settings(data_dir=tmp_path), driver=mock.Mock())
    running, most, lock = [0], [0], threading.Lock()

    def write(query: str, **_params: Any) -> list[dict[str, Any]]:
        folding = query == schema_queries.FOLD_TWIN_CLAIMS
        if folding:
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
        time.sleep(0.003)
        if folding:
            with lock:
                running[0] -= 1
        if "store_id" in query:
            return [{"store_id": "s1"}]
        return [{"model": "m", "dimension": 8}] if "dimension" in query else []

    done = threading.Event()

    def writer() -> None:
        for _ in range(20):
            store.forget_schema()
            store.ensure_schema("m", 8)
        done.set()

    def reconciler() -> None:
        while not done.is_set():
            store.record_reconcile("{}", datetime.now(UTC))

    # When both run at once
    with mock.patch.object(store, "_write", write), mock.patch.object(store, "_read", lambda *_a, **_k: []):
        threads = [threading.Thread(target=writer), threading.Thread(target=reconciler)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    # Then the twins' fold (a DETACH DELETE two could deadlock on) never ran twice at once
    assert most[0] == 1
