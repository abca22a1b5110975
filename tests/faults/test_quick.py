"""A fast subset of the fault suite, run by ./ops/test on a stack of its own.

The stack (Redis, Neo4j, workers) is separate from the one the integration tests use, because
these scenarios stop, kill and restart it; ops/test gives it ports of its own through
ENGRAM_FAULTS_PORTS. Its backup is embedded, or the Qdrant server of ops/test's server pass
(ENGRAM_QDRANT_URL), where it runs the rows whose subject is the backup (``QUICK_ON_SERVER``).
It is torn down when the module ends, passed or failed (tests/faults/conftest.py, shared with
test_restore_faults.py).
"""

from __future__ import annotations

import pytest

from tests.faults.scenarios import QUICK, QUICK_ON_SERVER, SCENARIOS
from tests.faults.stack import QdrantServerAddress
from tests.faults.trial import Context

pytestmark = [pytest.mark.faults, pytest.mark.backup]

# The rows of the backup the stack runs on: embedded, or the Qdrant server ops/test names.
ROWS = QUICK if QdrantServerAddress.from_env() is None else QUICK_ON_SERVER


@pytest.mark.parametrize("name", ROWS)
def test_scenario_ends_with_both_stores_in_parity(context: Context, name: str) -> None:
    # Given clean data, when the scenario causes its fault, undoes it and reconciles once
    context.stack.reset()
    result = SCENARIOS[name](context)

    # Then nothing is lost, nothing duplicated, and both stores agree
    assert (result.parity, result.lost, result.duplicated) == (True, 0, 0), result.detail
