"""FailedTries: 429 past a bound of failed key checks, per address and per key id, in Redis."""

from __future__ import annotations

import fakeredis
import pytest

from shared.errors import TooManyFailures, Unauthenticated
from shared.failed_tries import FailedTries, key_id_of, signing_key_id_of


def wrong() -> str:
    raise Unauthenticated("unknown or revoked API key")


def test_an_address_past_its_bound_is_refused_before_the_key_is_checked() -> None:
    tries = FailedTries(fakeredis.FakeRedis(), per_address=3, per_key=100, window_s=60)
    checked: list[str] = []

    def attempt() -> str:
        checked.append("looked up")
        return wrong()

    for _ in range(3):
        with pytest.raises(Unauthenticated) as refused:
            tries.check("10.0.0.1", None, attempt)
        assert not isinstance(refused.value, TooManyFailures)
    with pytest.raises(TooManyFailures) as blocked:
        tries.check("10.0.0.1", None, attempt)
    assert 1 <= blocked.value.retry_after_s <= 60 and len(checked) == 3  # no lookup once blocked
    assert tries.check("10.0.0.2", None, lambda: "ok") == "ok"  # another address is served


def test_a_key_id_guessed_from_many_addresses_is_refused_for_all() -> None:
    tries = FailedTries(fakeredis.FakeRedis(), per_address=100, per_key=2, window_s=60)
    for address in ("a", "b"):
        with pytest.raises(Unauthenticated):
            tries.check(address, "0123456789abcdef", wrong)
    with pytest.raises(TooManyFailures):
        tries.check("c", "0123456789abcdef", lambda: "ok")
    assert tries.check("c", "fedcba9876543210", lambda: "ok") == "ok"


def test_success_counts_nothing_and_the_key_id_is_read_from_a_token() -> None:
    tries = FailedTries(fakeredis.FakeRedis(), per_address=1, per_key=1, window_s=60)
    for _ in range(5):
        assert tries.check("a", "0123456789abcdef", lambda: "ok") == "ok"
    assert key_id_of("egk_0123456789abcdef_" + "A" * 43) == "0123456789abcdef"
    assert key_id_of("not a key") is None


def test_a_signed_request_counts_against_its_key_id_only_when_it_names_one() -> None:
    assert signing_key_id_of("0123456789abcdef") == "0123456789abcdef"
    for header in ("", "0123456789ABCDEF", "0123456789abcde", "0123456789abcdef0", "x" * 5000, "a:b"):
        assert signing_key_id_of(header) is None
