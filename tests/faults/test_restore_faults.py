"""The stores lost and brought back (tests/faults/restore_scenarios.py), run by ./ops/test on a
fault stack of its own, as test_quick.py runs its subset."""

from __future__ import annotations

import pytest

from tests.faults.restore_scenarios import RESTORE_SCENARIOS
from tests.faults.trial import Context

pytestmark = pytest.mark.faults


@pytest.mark.parametrize("name", sorted(RESTORE_SCENARIOS))
def test_a_lost_store_comes_back_with_nothing_lost(context: Context, name: str) -> None:
    # Given clean data, when one store is lost (the reconciler running meanwhile) and restored
    context.stack.reset()
    result = RESTORE_SCENARIOS[name](context)

    # Then nothing is lost, nothing duplicated, both stores agree, and the backup was never cut
    assert (result.parity, result.lost, result.duplicated) == (True, 0, 0), result.detail
