"""API keys and signed webhooks (shared/auth.py), over an in-memory key store."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from producers.http.auth import host_allowed, host_of
from shared.auth import ApiKey, Authenticator, Caller, make_key, signature
from shared.errors import ConfigurationError, Forbidden, InvalidInput, ServiceUnavailable, Unauthenticated
from shared.settings import Settings

NOW = datetime(2026, 11, 22, tzinfo=UTC)


class MemoryKeys:
    def __init__(self) -> None:
        self.keys: dict[str, ApiKey] = {}
        self.lookups = 0
        self.down = False

    def add_key(self, key: ApiKey) -> None:
        self.keys[key.id] = key

    def get_key(self, key_id: str) -> ApiKey | None:
        self.lookups += 1
        if self.down:
            raise ServiceUnavailable("neo4j", "connection refused")
        return self.keys.get(key_id)

    def list_keys(self) -> list[ApiKey]:
        return list(self.keys.values())

    def revoke_key(self, key_id: str, at: datetime) -> bool:
        if key_id not in self.keys:
            return False
        self.keys[key_id] = self.keys[key_id].model_copy(update={"revoked_at": at})
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def authenticator(keys: MemoryKeys, clock: Clock | None = None, cache_s: float = 0.0) -> Authenticator:
    seen: set[str] = set()

    def first_seen(token: str, ttl_s: float) -> bool:
        if token in seen:
            return False
        seen.add(token)
        return True

    return Authenticator(
        keys, cache_s=cache_s, stale_s=3600, tolerance_s=300, first_seen=first_seen, clock=clock or Clock()
    )


def test_a_tenant_key_acts_for_its_tenant_only() -> None:
    # Given a key made for alice
    keys = MemoryKeys()
    stored, shown = make_key("n8n", "tenant", "alice", signing=False, now=NOW)
    keys.add_key(stored)
    # When it is presented
    caller = authenticator(keys).bearer(shown.key)
    # Then it acts for alice, whether or not a body names her, and never for anyone else
    assert caller == Caller(key_id=stored.id, tenant="alice")
    assert caller.tenant_for(None) == "alice"
    assert caller.tenant_for("alice") == "alice"
    for other in ("bob", "alice ", "\u00a0alice", "ALICE", "alice\u200b"):
        with pytest.raises(Forbidden):
            caller.tenant_for(other)
    assert not caller.admin


def test_an_admin_key_must_name_the_tenant() -> None:
    keys = MemoryKeys()
    stored, shown = make_key("ops", "admin", None, signing=False, now=NOW)
    keys.add_key(stored)
    caller = authenticator(keys).bearer(shown.key)
    assert caller.admin
    assert caller.tenant_for("bob") == "bob"
    with pytest.raises(InvalidInput, match="user_id is required"):
        caller.tenant_for(None)


@pytest.mark.parametrize("tenant", ["alice ", "\u00a0alice", "alice\u200b", "cafe\u0301", "a\x00b", ""])
def test_a_key_for_a_look_alike_of_a_tenant_is_not_made(tenant: str) -> None:
    # A key decides the tenant of its requests unchecked: it may only name a tenant in its one form
    with pytest.raises(InvalidInput, match="not an identifier"):
        make_key("n8n", "tenant", tenant, signing=False, now=NOW)


def test_the_store_keeps_a_hash_never_the_secret() -> None:
    stored, shown = make_key("n8n", "tenant", "alice", signing=True, now=NOW)
    secret = shown.key.split("_", 2)[2]
    assert secret not in stored.model_dump_json()
    assert shown.key.startswith(f"egk_{stored.id}_")
    assert stored.signing_secret == shown.signing_secret
    assert shown.info.signed_webhooks


@pytest.mark.parametrize(
    "token",
    ["", "Bearer", "egk_", "egk_0123456789abcdef_short", "x" * 80, "egk_0123456789abcdef_" + "A" * 43],
)
def test_malformed_unknown_and_wrong_keys_are_refused(token: str) -> None:
    keys = MemoryKeys()
    stored, _ = make_key("n8n", "tenant", "alice", signing=False, now=NOW)
    keys.add_key(stored)
    with pytest.raises(Unauthenticated):
        authenticator(keys).bearer(token)


def test_a_key_with_the_right_id_and_a_wrong_secret_is_refused() -> None:
    keys = MemoryKeys()
    stored, shown = make_key("n8n", "tenant", "alice", signing=False, now=NOW)
    keys.add_key(stored)
    forged = shown.key[:-1] + ("A" if shown.key[-1] != "A" else "B")
    with pytest.raises(Unauthenticated, match="unknown or revoked"):
        authenticator(keys).bearer(forged)


def test_a_revoked_key_stops_working_once_its_cache_expires() -> None:
    # Given a key in use, cached for 5 s
    keys = MemoryKeys()
    stored, shown = make_key("n8n", "tenant", "alice", signing=False, now=NOW)
    keys.add_key(stored)
    auth = authenticator(keys, cache_s=5.0)
    auth.bearer(shown.key)
    # When it is revoked
    keys.revoke_key(stored.id, NOW)
    auth.bearer(shown.key)  # still cached: one lookup so far
    assert keys.lookups == 1
    auth.forget()  # what the cache's expiry does
    # Then it is refused
    with pytest.raises(Unauthenticated):
        auth.bearer(shown.key)


def test_a_key_seen_before_works_while_the_store_is_down_and_a_new_one_gets_503() -> None:
    keys = MemoryKeys()
    seen, seen_token = make_key("a", "tenant", "alice", signing=False, now=NOW)
    new, new_token = make_key("b", "tenant", "bob", signing=False, now=NOW)
    keys.add_key(seen)
    keys.add_key(new)
    auth = authenticator(keys, cache_s=0.0)
    auth.bearer(seen_token.key)
    keys.down = True
    assert auth.bearer(seen_token.key).tenant == "alice"
    with pytest.raises(ServiceUnavailable):
        auth.bearer(new_token.key)


def signed_request(secret: str, timestamp: str, body: bytes) -> str:
    return signature(secret, timestamp, body)


def test_a_signed_webhook_holds_only_for_its_body_time_and_once() -> None:
    # Given a key made for signed webhooks
    keys = MemoryKeys()
    clock = Clock()
    stored, shown = make_key("hook", "tenant", "alice", signing=True, now=NOW)
    keys.add_key(stored)
    auth = authenticator(keys, clock)
    assert shown.signing_secret is not None
    body = b'{"text": "hello"}'
    timestamp = str(int(clock.now))
    good = signed_request(shown.signing_secret, timestamp, body)
    # When it is signed right, it acts for the key's tenant
    assert auth.signed(stored.id, timestamp, good, body).tenant == "alice"
    # Then the same request again is a replay
    with pytest.raises(Unauthenticated, match="replay"):
        auth.signed(stored.id, timestamp, good, body)
    # And another body, another time, a stale time or another secret do not hold
    with pytest.raises(Unauthenticated, match="wrong signature"):
        auth.signed(stored.id, timestamp, good, b'{"text": "hellO"}')
    later = str(int(clock.now) + 1)
    with pytest.raises(Unauthenticated, match="wrong signature"):
        auth.signed(stored.id, later, good, body)
    stale = str(int(clock.now) - 301)
    with pytest.raises(Unauthenticated, match="window"):
        auth.signed(stored.id, stale, signed_request(shown.signing_secret, stale, body), body)
    with pytest.raises(Unauthenticated, match="wrong signature"):
        auth.signed(stored.id, timestamp, signed_request("other", timestamp, body), body)
    for bad_time in ("", "-1", "1e9", "now"):
        with pytest.raises(Unauthenticated):
            auth.signed(stored.id, bad_time, good, body)


def test_a_key_without_a_signing_secret_cannot_sign() -> None:
    keys = MemoryKeys()
    clock = Clock()
    stored, _ = make_key("plain", "tenant", "alice", signing=False, now=NOW)
    keys.add_key(stored)
    timestamp = str(int(clock.now))
    with pytest.raises(Unauthenticated, match="a key without signing"):
        authenticator(keys, clock).signed(stored.id, timestamp, signature("", timestamp, b""), b"")


@pytest.mark.parametrize(
    ("header", "host"),
    [
        ("127.0.0.1:8000", "127.0.0.1"),
        ("LocalHost", "localhost"),
        ("[::1]:8000", "[::1]"),
        ("[::1]", "[::1]"),
        ("localhost:8014, evil.example", None),
        ("127.0.0.1:8014@evil.example", None),
        ("localhost:65536", None),
        ("", None),
    ],
)
def test_the_host_of_a_host_header(header: str, host: str | None) -> None:
    assert host_of(header) == host


def test_the_host_allow_list() -> None:
    allowed = ["127.0.0.1", "localhost", "[::1]", "*.example.com"]
    assert host_allowed("localhost:8000", allowed)
    assert host_allowed("api.example.com", allowed)
    assert not host_allowed("example.com", allowed)
    assert not host_allowed("evil.test", allowed)
    assert not host_allowed("", allowed)
    assert not host_allowed("localhost.evil.test", allowed)
    assert host_allowed("anything", ["*"])


def test_local_mode_without_keys_is_refused_off_loopback() -> None:
    assert Settings(auth_mode="local", api_host="127.0.0.1").auth_mode == "local"
    assert Settings(auth_mode="local", api_host="::1").auth_mode == "local"
    with pytest.raises(ConfigurationError, match="loopback"):
        Settings(auth_mode="local", api_host="0.0.0.0")
    assert Settings(auth_mode="keys", api_host="0.0.0.0").api_host == "0.0.0.0"


def test_a_cached_key_expiring_while_it_is_read_is_read_from_the_store_not_a_key_error() -> None:
    # The quick fuzz profile met a 500: the key cache's entry expired between ``in`` and ``[]``
    # (two clock reads), and the second was a KeyError. A cache whose clock moves on every read
    # makes that moment happen on each lookup.
    from cachetools import TTLCache

    keys = MemoryKeys()
    stored, shown = make_key("n8n", "tenant", "alice", signing=False, now=NOW)
    keys.add_key(stored)
    auth = authenticator(keys, cache_s=1.0)
    ticks = iter(range(10_000))
    auth._fresh = TTLCache(maxsize=16, ttl=1.0, timer=lambda: next(ticks) * 0.6)

    for _ in range(5):
        assert auth.bearer(shown.key) == Caller(key_id=stored.id, tenant="alice")
