"""Scale-out fixtures: a real Qdrant server (tests/scaleout/qdrant_server.py) beside the stack's
(tests/stack.py). ./ops/test runs this folder only where the server is built, and says so in its
last lines where it is not.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from shared.settings import Settings
from tests.integration.support import forget_failed_tries
from tests.scaleout.qdrant_server import QdrantServer, running_server


@pytest.fixture(scope="session")
def qdrant_server(settings: Settings) -> Iterator[QdrantServer]:
    """A real Qdrant server (tests/scaleout/qdrant_server.py), up for the rest of the session."""
    with running_server() as server:
        yield server


@pytest.fixture(autouse=True)
def fresh_failure_counts(redis_client: redis.Redis) -> None:
    """Each test starts with no failed key checks counted (shared/failed_tries.py): the tests of a
    run share one client address, and one test's refused keys must not make another's a 429."""
    forget_failed_tries(redis_client)
