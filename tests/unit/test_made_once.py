"""What the write worker's threads share (its pool is threads) is made once, however many of them
ask for it first at the same moment: the graph's extractor (spaCy's loads a model) and a
migration's embedder (a model, or an HTTP client)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import shared.container
import shared.graph.extractors as extractors
from shared.container import Container
from shared.settings import Settings
from shared.stores.base import EmbeddingTarget
from shared.stores.neo4j import Neo4jStore


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


def test_the_graph_writer_is_made_once_for_threads_asking_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[int] = []
    monkeypatch.setattr(extractors, "make_extractor", slowly(extractors.make_extractor, made))
    stores = [Neo4jStore(Settings(data_dir=tmp_path)) for _ in range(10)]  # never connected
    try:
        handed = [at_once(lambda store=store: store.graph) for store in stores]  # type: ignore[misc]
    finally:
        for store in stores:
            store.close()

    assert [len(writers) for writers in handed] == [1] * 10
    assert len(made) == 10


def test_a_migrations_embedder_is_made_once_for_threads_asking_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[int] = []
    monkeypatch.setattr(shared.container, "make_embedder", slowly(lambda _settings: object(), made))
    target = EmbeddingTarget(
        backend="local",
        model="m",
        dimension=8,
        url=None,
        max_tokens=256,
        tokenizer_path=None,
        local_model_path=None,
    )
    containers = [Container(Settings(data_dir=tmp_path)) for _ in range(10)]
    handed = [at_once(lambda c=c: c.embedder_for(target)) for c in containers]  # type: ignore[misc]

    assert [len(embedders) for embedders in handed] == [1] * 10
    assert len(made) == 10
