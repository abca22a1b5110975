"""Parity of the two stores for one tenant, as the integrity suites check it: the memories Neo4j
holds, the points Qdrant holds, and the two alike at every version and hash, all synced. A helper
module, so no test module imports another."""

from __future__ import annotations

from typing import Any

import neo4j

from shared.settings import Settings
from tests.integration.support import Workers, cypher, qdrant_reader, tenant_points


def memories(driver: neo4j.Driver, user_id: str) -> dict[str, dict[str, Any]]:
    rows = cypher(
        driver,
        "MATCH (m:Memory {user_id: $u}) RETURN m.id AS id, m.version AS version, m.content_hash AS hash, m.vector_sync AS sync",
        u=user_id,
    )
    return {row["id"]: row for row in rows}


def points(workers: Workers, settings: Settings, user_id: str) -> dict[str, dict[str, Any]]:
    with qdrant_reader(workers, settings) as store:
        found = tenant_points(store, user_id)
    return {point_id: dict(p.payload) for point_id, p in found.items()}


def assert_parity(driver: neo4j.Driver, workers: Workers, settings: Settings, user_id: str) -> dict[str, Any]:
    """Both stores hold the same memories at the same versions and hashes, all synced."""
    stored = memories(driver, user_id)
    held = points(workers, settings, user_id)
    assert set(held) == set(stored)
    for memory_id, row in stored.items():
        assert row["sync"] == "synced"
        assert (held[memory_id]["version"], held[memory_id]["content_hash"]) == (row["version"], row["hash"])
    return stored
