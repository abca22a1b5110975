"""The stores lost and brought back (tests/faults/restore_scenarios.py), run by ./ops/test on a
fault stack of its own, as test_quick.py runs its subset."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.restore_scenarios import RESTORE_SCENARIOS
from tests.faults.stack import FaultStack
from tests.faults.test_quick import QUICK_OPTIONS
from tests.faults.trial import Context

pytestmark = pytest.mark.faults


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


@pytest.mark.parametrize("name", sorted(RESTORE_SCENARIOS))
def test_a_lost_store_comes_back_with_nothing_lost(context: Context, name: str) -> None:
    # Given clean data, when one store is lost (the reconciler running meanwhile) and restored
    context.stack.reset()
    result = RESTORE_SCENARIOS[name](context)

    # Then nothing is lost, nothing duplicated, both stores agree, and the backup was never cut
    assert (result.parity, result.lost, result.duplicated) == (True, 0, 0), result.detail
