"""A fast subset of the fault suite, run by ./ops/test on a stack of its own.

The stack (Redis, Neo4j, workers) is separate from the one the integration tests use, because
these scenarios stop, kill and restart it; ops/test gives it ports of its own through
ENGRAM_FAULTS_PORTS. It is torn down when the module ends, passed or failed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.scenarios import QUICK, SCENARIOS
from tests.faults.stack import FaultStack
from tests.faults.trial import Context, Options

pytestmark = pytest.mark.faults

# The soak runs 1.5 minutes on a fixed seed: a failure replays with ops/faults --soak --seed 1 --quick.
QUICK_OPTIONS = Options(docs=60, quick=True, repair_timeout_s=90, neo4j_outage_s=30, seed=1)


@pytest.fixture(scope="module")
def context() -> Iterator[Context]:
    data_dir = os.environ.get("ENGRAM_DATA_DIR", "")
    if "engram-test" not in data_dir or "ENGRAM_FAULTS_PORTS" not in os.environ:
        pytest.exit(
            "the fault suite runs through ./ops/test or ops/faults, which give it ports of its own", 2
        )
    stack = FaultStack.from_env(Path(data_dir) / "faults")
    try:
        stack.open()
        context = Context(stack, QUICK_OPTIONS)
        try:
            yield context
        finally:
            context.close()
    finally:
        stack.close()


@pytest.mark.parametrize("name", QUICK)
def test_scenario_ends_with_both_stores_in_parity(context: Context, name: str) -> None:
    # Given clean data, when the scenario causes its fault, undoes it and reconciles once
    context.stack.reset()
    result = SCENARIOS[name](context)

    # Then nothing is lost, nothing duplicated, and both stores agree
    assert (result.parity, result.lost, result.duplicated) == (True, 0, 0), result.detail
