"""Neo4j as ops/ starts it plans a statement once, whatever the lengths of its list parameters
(ops/neo4j's launcher): by default it plans again for each size class of a list, and the first
one-document write after a load in batches paid 0.5-0.7 s of planning for every statement."""

from __future__ import annotations

from typing import Any

import neo4j
import pytest

from shared.stores.neo4j.write_queries import UPSERT_MEMORIES

pytestmark = pytest.mark.integration


def _plan(driver: neo4j.Driver, documents: int) -> list[tuple[str, str]]:
    """The operators of the write's Memory statement for ``documents`` documents, with details."""
    rows = [{"id": f"m{i}", "document_key": f"k{i}", "version": 1} for i in range(documents)]
    keys = [f"k{i}" for i in range(documents)]
    with driver.session(notifications_min_severity="OFF") as session:
        summary = session.run("EXPLAIN " + UPSERT_MEMORIES, memories=rows, accepted=keys, now=None).consume()
    assert summary.plan is not None
    return _operators(summary.plan)


def _operators(plan: dict[str, Any]) -> list[tuple[str, str]]:
    found = [(str(plan["operatorType"]).split("@", 1)[0], str((plan.get("args") or {}).get("Details", "")))]
    for child in plan.get("children", []):
        found += _operators(child)
    return found


def test_a_statement_has_one_plan_whatever_the_length_of_its_lists(neo4j_driver: neo4j.Driver) -> None:
    # Given the write's statement for one document, for a few and for a batch of 128
    one, few, batch = (_plan(neo4j_driver, n) for n in (1, 3, 128))

    # Then Neo4j plans it alike: no plan of its own for a one-element list (`= $accepted[0]`)
    assert one == few == batch
    assert any("IN $accepted" in details for _, details in one)
