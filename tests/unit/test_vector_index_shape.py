"""The vector index's shape as Engram asks for it and as it reads it back, by server version."""

from __future__ import annotations

import pytest

from shared.stores.neo4j.connection import FILTERS_IN_VECTOR_INDEX_SINCE, version_of
from shared.stores.neo4j.schema import held_index_options, vector_index_options


@pytest.mark.parametrize(
    ("text", "version", "filters_inside"),
    [
        ("5.26.30", (5, 26), False),
        ("2026.01.4", (2026, 1), False),  # SEARCH was a preview in 2026.01
        ("2026.02.0", (2026, 2), True),
        ("2026.08.1", (2026, 8), True),
        ("2027.01.0-SNAPSHOT", (2027, 1), True),
        ("", (0, 0), False),
        ("dev", (0, 0), False),
    ],
)
def test_a_server_version_is_read_as_major_and_minor(
    text: str, version: tuple[int, int], filters_inside: bool
) -> None:
    assert version_of(text) == version
    assert (version_of(text) >= FILTERS_IN_VECTOR_INDEX_SINCE) is filters_inside


def test_on_5_26_the_index_is_asked_as_before_and_read_back_equal() -> None:
    wanted = vector_index_options(16, 200, False, with_tenant=False)
    assert wanted == {
        "vector.hnsw.m": 16,
        "vector.hnsw.ef_construction": 200,
        "vector.quantization.enabled": False,
        "with": [],
    }
    shown = {
        "vector.dimensions": 384,
        "vector.similarity_function": "COSINE",
        "vector.hnsw.m": 16,
        "vector.hnsw.ef_construction": 200,
        "vector.quantization.enabled": False,
    }
    assert held_index_options(shown, ["embedding"]) == wanted


@pytest.mark.parametrize(("quantization", "kind"), [(False, "NONE"), (True, "SCALAR")])
def test_on_2026_the_index_holds_the_tenant_and_names_its_quantization(quantization: bool, kind: str) -> None:
    wanted = vector_index_options(16, 200, quantization, with_tenant=True)
    assert wanted == {
        "vector.hnsw.m": 16,
        "vector.hnsw.ef_construction": 200,
        "vector.quantization.type": kind,
        "with": ["user_id"],
    }
    shown = {
        "vector.dimensions": 384,
        "vector.default_search_expansion_factor": 1.0,
        "vector.hnsw.m": 16,
        "vector.quantization.type": kind,
        "vector.similarity_function": "COSINE",
        "vector.hnsw.ef_construction": 200,
    }
    assert held_index_options(shown, ["embedding", "user_id"]) == wanted


def test_on_2026_an_index_without_the_tenant_or_made_binary_is_not_what_is_asked() -> None:
    wanted = vector_index_options(16, 200, False, with_tenant=True)
    # A 5.26 store's index, upgraded in place: 2026 shows its quantization by type too
    upgraded = {"vector.hnsw.m": 16, "vector.hnsw.ef_construction": 100, "vector.quantization.type": "SCALAR"}
    assert held_index_options(upgraded, ["embedding"]) != wanted
    # One made with 2026's own defaults: BINARY
    default = {"vector.hnsw.m": 16, "vector.hnsw.ef_construction": 100, "vector.quantization.type": "BINARY"}
    assert held_index_options(default, ["embedding", "user_id"]) != wanted
