"""The one retry policy: transient errors retried with capped, jittered backoff for a budget."""

from __future__ import annotations

import pytest

from shared.errors import (
    EmbeddingRejected,
    GraphStoreRejected,
    InvalidInput,
    SearchTimeout,
    ServiceUnavailable,
    StagingMissing,
    TransientError,
    VectorStoreRejected,
)
from shared.retry import RetryPolicy
from shared.settings import Settings

POLICY = RetryPolicy(budget_s=600.0, backoff_max_s=30.0)


@pytest.mark.parametrize(
    "exc", [ServiceUnavailable("neo4j", "down"), TransientError("timeout"), SearchTimeout("slow")]
)
def test_transient_errors_are_retried_until_the_budget_is_spent(exc: Exception) -> None:
    # Given a transient failure, at each point of the budget
    for failing_for in (0.0, 1.0, 300.0, 599.0):
        # Then another try is due after a positive wait
        countdown = POLICY.countdown(exc, retries=3, failing_for_s=failing_for)
        assert countdown is not None and countdown > 0

    # and once the budget is spent, never again
    assert POLICY.countdown(exc, retries=3, failing_for_s=600.0) is None
    assert POLICY.countdown(exc, retries=3, failing_for_s=10_000.0) is None


@pytest.mark.parametrize(
    "exc",
    [
        InvalidInput("bad"),
        EmbeddingRejected("400"),
        VectorStoreRejected("400"),
        GraphStoreRejected("constraint"),
        StagingMissing("gone"),
        ValueError("not ours"),
        RuntimeError("not ours"),
    ],
)
def test_permanent_and_unknown_errors_are_never_retried(exc: Exception) -> None:
    assert POLICY.countdown(exc, retries=0, failing_for_s=0.0) is None


def test_the_last_wait_never_runs_past_the_budget() -> None:
    countdown = POLICY.countdown(ServiceUnavailable("redis", "down"), retries=20, failing_for_s=595.0)

    assert countdown is not None and countdown <= 5.0


@pytest.mark.parametrize("retries", [0, 1, 2, 3, 4, 5, 8, 40, 10_000])
def test_backoff_is_exponential_capped_and_jittered_within_the_top_half(retries: int) -> None:
    ceiling = min(30.0, 1.0 * 2.0**retries) if retries < 64 else 30.0

    waits = [POLICY.backoff(retries) for _ in range(200)]

    assert all(ceiling / 2 <= wait <= ceiling for wait in waits)
    assert len(set(waits)) > 150  # jittered, not one fixed wait


def test_backoff_grows_until_the_cap() -> None:
    policy = RetryPolicy(budget_s=3600.0, backoff_max_s=30.0, backoff_base_s=1.0)

    lows = [min(policy.backoff(r) for _ in range(50)) for r in range(8)]

    assert lows[0] < lows[2] < lows[4]  # 0.5+, 2+, 8+
    assert all(policy.backoff(50) <= 30.0 for _ in range(100))


def test_policy_reads_its_numbers_from_the_settings() -> None:
    settings = Settings(
        _env_file=None, task_retry_budget_s=1234, task_retry_backoff_max_s=17, visibility_timeout_s=200
    )

    policy = RetryPolicy.from_settings(settings)

    assert (policy.budget_s, policy.backoff_max_s) == (1234, 17)
