"""Integration fixtures of their own (the stack's are in tests/stack.py): every test starts with no
failed key checks counted, no log holds a credential after the session, and the fuzz run's and the
probes' figures are printed at the end.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from shared.settings import Settings
from tests.integration import log_secrets
from tests.integration.support import forget_failed_tries


@pytest.fixture(scope="session", autouse=True)
def no_secret_in_any_log(settings: Settings) -> Iterator[None]:
    """After every test of the session (the fuzz and probe runs among them): no log file holds
    a key or cookie a test used (tests/integration/log_secrets.py)."""
    logs = settings.data_dir / "logs"
    with log_secrets.in_process_log(logs):
        yield
    found = log_secrets.found_in(logs)
    assert not found, f"credentials written to logs: {found}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The API fuzz run's figures and the cross-tenant probes' counts, when they ran."""
    from tests.integration.fuzz import TALLY
    from tests.integration.screens import SCREENSHOTS
    from tests.integration.tenants import PROBES

    if TALLY.requests:
        terminalreporter.section("API fuzz (schemathesis)")
        for line in TALLY.lines():
            terminalreporter.write_line(line)
    if PROBES.count:
        terminalreporter.section("Cross-tenant probes")
        for line in PROBES.lines():
            terminalreporter.write_line(line)
    if SCREENSHOTS:
        terminalreporter.section("Status page screenshots")
        for path in SCREENSHOTS:
            terminalreporter.write_line(str(path))


@pytest.fixture(autouse=True)
def fresh_failure_counts(redis_client: redis.Redis) -> None:
    """Each test starts with no failed key checks counted (shared/failed_tries.py): the tests of a
    run share one client address, and one test's refused keys must not make another's a 429."""
    forget_failed_tries(redis_client)
