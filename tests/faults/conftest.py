"""What the fault suites share: each module's stack of its own and the quick run's options.

The stack (Redis, Neo4j, workers) is separate from the one the integration tests use, because the
scenarios stop, kill and restart it; ops/test gives it ports of its own through
ENGRAM_FAULTS_PORTS. A module gets its own, torn down when the module ends, passed or failed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.stack import FaultStack, QdrantServerAddress
from tests.faults.trial import Context, Options, opened

# The soak runs 1.5 minutes on a fixed seed: a failure replays with ops/faults --soak --seed 1 --quick.
QUICK_OPTIONS = Options(docs=60, quick=True, repair_timeout_s=90, neo4j_outage_s=30, seed=1)


@pytest.fixture(scope="module")
def context() -> Iterator[Context]:
    data_dir = os.environ.get("ENGRAM_DATA_DIR", "")
    if "engram-test" not in data_dir or "ENGRAM_FAULTS_PORTS" not in os.environ:
        pytest.exit(
            "the fault suite runs through ./ops/test or ops/faults, which give it ports of its own", 2
        )
    # The backup is the test services': embedded, or ops/test's Qdrant server (its server pass).
    stack = FaultStack.from_env(Path(data_dir) / "faults", QdrantServerAddress.from_env())
    with opened(stack, QUICK_OPTIONS) as context:
        yield context
