"""Who is calling: API keys that decide the tenant, and signed webhook requests.

A key is ``egk_<id>_<secret>``. The store keeps the id, the tenant (or the admin scope) and the
SHA-256 of the secret, never the secret: a key is shown once, when it is made. The secret has 256
random bits, so a plain hash is enough (a slow password hash guards guessable secrets). A key made
for webhooks also has a signing secret, which the server must be able to read to check a
signature (HMAC-SHA256 of ``"<timestamp>." + raw body``): it is kept as it is.

``Authenticator`` is pure logic over a ``KeyStore``; keys are cached for a few seconds (a revoked
key stops working within ``ENGRAM_AUTH_CACHE_S``), and a key seen recently still works while the
store is unreachable for ``ENGRAM_AUTH_STALE_S``, so a Neo4j outage does not stop ingestion.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Literal, Protocol, cast

from cachetools import TTLCache
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from shared.errors import Forbidden, InvalidInput, ServiceUnavailable, Unauthenticated
from shared.models import Identifier

KEY_PREFIX = "egk"
_KEY = re.compile(r"egk_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")
_SIGNATURE = re.compile(r"v1=([0-9a-f]{64})")
_KEY_ID = re.compile(r"[0-9a-f]{16}")
# Unix seconds in ASCII digits ("²" is a digit to str.isdigit, not to int), at most 12 of them.
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
# One answer for an unknown key, a key made without signing and a wrong signature.
BAD_SIGNATURE = "the signed request is not valid: unknown key, a key without signing, or a wrong signature"

Scope = Literal["tenant", "admin"]


_UNCACHED = object()
"""What a cache read finds when it holds nothing for the key (None is a cached answer: no such key)."""


class ApiKey(BaseModel):
    """A key as the store holds it: no secret of the bearer's, only its hash."""

    id: str
    name: str
    scope: Scope
    tenant: str | None = Field(None, description="The one tenant a tenant key acts for.")
    secret_hash: str
    signing_secret: str | None = Field(None, description="For signed webhooks; None if not made for them.")
    created_at: datetime
    revoked_at: datetime | None = None


class KeyInfo(BaseModel):
    """A key as ``engram keys list`` shows it: nothing secret."""

    id: str
    name: str
    scope: Scope
    tenant: str | None
    signed_webhooks: bool
    created_at: datetime
    revoked_at: datetime | None

    @classmethod
    def of(cls, key: ApiKey) -> KeyInfo:
        return cls(
            id=key.id,
            name=key.name,
            scope=key.scope,
            tenant=key.tenant,
            signed_webhooks=key.signing_secret is not None,
            created_at=key.created_at,
            revoked_at=key.revoked_at,
        )


class NewKey(BaseModel):
    """A key just made: the only time its secrets are seen."""

    info: KeyInfo
    key: str
    signing_secret: str | None


class KeyStore(Protocol):
    def add_key(self, key: ApiKey) -> None: ...

    def get_key(self, key_id: str) -> ApiKey | None: ...

    def list_keys(self) -> list[ApiKey]: ...

    def revoke_key(self, key_id: str, at: datetime) -> bool: ...


class Caller(BaseModel):
    """Whom a request acts for: one tenant, or any (an admin key, or the local mode without keys)."""

    key_id: str | None
    tenant: str | None = Field(None, description="Set for a tenant key: the only tenant it may touch.")

    @property
    def admin(self) -> bool:
        return self.tenant is None

    def tenant_for(self, named: str | None) -> str:
        """The tenant a request acts on: a tenant key's own (a body or query naming another is
        refused, never followed); an admin key must name one."""
        if self.tenant is not None:
            if named is not None and named != self.tenant:
                raise Forbidden("this API key is not for that user_id")
            return self.tenant
        if named is None:
            raise InvalidInput("user_id is required with an admin key (it names the tenant)")
        return named


LOCAL_CALLER = Caller(key_id=None)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_signing_secret() -> str:
    return secrets.token_urlsafe(32)


def make_key(
    name: str, scope: Scope, tenant: str | None, signing: bool, now: datetime
) -> tuple[ApiKey, NewKey]:
    """A new key: what the store keeps, and what its owner is shown once."""
    if (scope == "tenant") != (tenant is not None):
        raise InvalidInput("a tenant key names its tenant; an admin key names none")
    if tenant is not None:
        # The key decides the tenant of every request it makes, unchecked after: a key for
        # "\u00a0alice" would store a tenant no user_id may name.
        try:
            TypeAdapter(Identifier).validate_python(tenant)
        except ValidationError as exc:
            raise InvalidInput(
                f"the tenant {tenant!r} is not an identifier: {exc.errors()[0]['msg']}"
            ) from exc
    key_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
    signing_secret = new_signing_secret() if signing else None
    stored = ApiKey(
        id=key_id,
        name=name,
        scope=scope,
        tenant=tenant,
        secret_hash=hash_secret(secret),
        signing_secret=signing_secret,
        created_at=now,
    )
    shown = NewKey(
        info=KeyInfo.of(stored), key=f"{KEY_PREFIX}_{key_id}_{secret}", signing_secret=signing_secret
    )
    return stored, shown


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The ``X-Engram-Signature`` value of a webhook request."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"v1={digest}"


class Authenticator:
    """Turns a bearer key, or a signed request, into a ``Caller``; raises ``Unauthenticated``."""

    def __init__(
        self,
        store: KeyStore,
        *,
        cache_s: float,
        stale_s: float,
        tolerance_s: float,
        first_seen: Callable[[str, float], bool],
        clock: Callable[[], float],
    ) -> None:
        self._store = store
        self._fresh: TTLCache[str, ApiKey | None] = TTLCache(maxsize=10_000, ttl=cache_s)
        self._last_known: TTLCache[str, ApiKey | None] = TTLCache(maxsize=10_000, ttl=max(stale_s, cache_s))
        self._lock = threading.Lock()
        self._tolerance_s = tolerance_s
        self._first_seen = first_seen
        self._clock = clock

    def bearer(self, token: str) -> Caller:
        # The key in its one exact form: HTTP already took off the spaces and tabs around a header
        # value, so anything else around it (a no-break space, say) makes it another string.
        match = _KEY.fullmatch(token)
        if match is None:
            raise Unauthenticated("not an Engram API key")
        key = self._live_key(match.group(1))
        if not hmac.compare_digest(hash_secret(match.group(2)), key.secret_hash):
            raise Unauthenticated("unknown or revoked API key")
        return Caller(key_id=key.id, tenant=key.tenant)

    def live(self, key_id: str) -> Caller:
        """The caller of a key known by its id alone, while it is live (a signed-in status page
        holds the id, never the key): a revoked key stops within ENGRAM_AUTH_CACHE_S."""
        key = self._live_key(key_id)
        return Caller(key_id=key.id, tenant=key.tenant)

    def signing_key(self, key_id: str, timestamp: str) -> ApiKey:
        """The live signing key a signed request names, checked before its body is read: an
        unknown, revoked or non-signing key, or a timestamp outside the window, is refused with
        no body read. The three key refusals say the same words (no oracle of which keys exist)."""
        if not _TIMESTAMP.fullmatch(timestamp):
            raise Unauthenticated("X-Engram-Timestamp must be Unix seconds")
        skew = abs(self._clock() - int(timestamp))
        if skew > self._tolerance_s:
            raise Unauthenticated(
                f"the signature's timestamp is {skew:.0f} s away from now; the window is "
                f"{self._tolerance_s:g} s (ENGRAM_WEBHOOK_TOLERANCE_S)"
            )
        if not _KEY_ID.fullmatch(key_id):
            raise Unauthenticated(BAD_SIGNATURE)
        try:
            key = self._live_key(key_id)
        except Unauthenticated:
            raise Unauthenticated(BAD_SIGNATURE) from None
        if key.signing_secret is None:
            raise Unauthenticated(BAD_SIGNATURE)
        return key

    def signed(self, key_id: str, timestamp: str, given: str, body: bytes) -> Caller:
        """A webhook request signed with the key's signing secret, within the replay window, and
        not seen before (a replayed request is refused even inside the window)."""
        key = self.signing_key(key_id, timestamp)
        assert key.signing_secret is not None  # signing_key refuses a key without one
        match = _SIGNATURE.fullmatch(given)
        expected = signature(key.signing_secret, timestamp, body)
        if match is None or not hmac.compare_digest(expected, f"v1={match.group(1)}"):
            raise Unauthenticated(BAD_SIGNATURE)
        if not self._first_seen(f"{key_id}:{match.group(1)}", 2 * self._tolerance_s):
            raise Unauthenticated("this signed request was received before (a replay)")
        return Caller(key_id=key.id, tenant=key.tenant)

    def forget(self) -> None:
        """Drops what is cached (a test revoking a key, an operator's reload)."""
        with self._lock:
            self._fresh.clear()
            self._last_known.clear()

    def _live_key(self, key_id: str) -> ApiKey:
        key = self._lookup(key_id)
        if key is None or key.revoked_at is not None:
            raise Unauthenticated("unknown or revoked API key")
        return key

    def _lookup(self, key_id: str) -> ApiKey | None:
        # One read each (``get`` with a marker), never ``in`` then ``[]``: the entry can expire between
        # the two, and the second is then a KeyError (the quick fuzz profile met it as a 500).
        with self._lock:
            fresh = self._fresh.get(key_id, _UNCACHED)
        if fresh is not _UNCACHED:
            return cast("ApiKey | None", fresh)
        try:
            key = self._store.get_key(key_id)
        except ServiceUnavailable:
            with self._lock:
                known = self._last_known.get(key_id, _UNCACHED)
            if known is not _UNCACHED:
                return cast("ApiKey | None", known)
            raise
        with self._lock:
            self._fresh[key_id] = key
            self._last_known[key_id] = key
        return key
