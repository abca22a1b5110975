"""The status page's sign-in: a signed, expiring cookie that names the key's identity, never the key.

A browser cannot send the API-key header when it navigates, so ``/ui`` takes the key once, in a
sign-in form, and answers with a cookie holding a token signed by itsdangerous (HMAC-SHA1 over
the payload and a timestamp) with ``ENGRAM_UI_SESSION_KEY`` (unset: ``<data_dir>/secrets/
ui-session.key``, made once, 0600, as the webhook sealing key is). The token carries the key's id,
its tenant (none for an admin key) and a random CSRF token; it expires after
``ENGRAM_UI_SESSION_S``. Each request looks the key up again (``Authenticator.live``), so a
revoked key's sign-ins end within ``ENGRAM_AUTH_CACHE_S``.

Signing out ends the session at once, wherever its cookie is kept: the session's id (a hash of
its CSRF token, random with each sign-in) is written to Redis (``SignOuts``) until its token
would expire anyway, and a token of an ended session is read as no session.

The cookie is ``HttpOnly`` (no script reads it), ``SameSite=Strict`` (no other site's page sends
it), ``Path=/ui`` (no other route receives it) and ``Secure`` when the page is served over HTTPS.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets as token_source
from dataclasses import dataclass

import redis
from itsdangerous import BadSignature, URLSafeTimedSerializer

from shared import secrets
from shared.redis_client import translated_errors
from shared.settings import Settings

COOKIE = "engram_ui"
COOKIE_PATH = "/ui"
SESSION_KEY_FILE = "ui-session.key"
_SALT = "engram-ui-session"
_NOTICE_SALT = "engram-ui-notice"
NOTICE_S = 300  # a notice is for the page the server redirects to, not for a link kept


@dataclass(frozen=True, slots=True)
class Session:
    """Whom a signed-in page acts for: a key's id and its tenant (None: an admin key)."""

    key_id: str | None
    tenant: str | None
    csrf: str

    @property
    def admin(self) -> bool:
        return self.tenant is None

    def csrf_matches(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.csrf.encode())

    @property
    def id(self) -> str:
        """Names the session (not its CSRF token) where it is recorded signed out."""
        return hashlib.sha256(self.csrf.encode()).hexdigest()[:32]


class SignOuts:
    """The sessions signed out before their tokens expire, in Redis: every app process agrees."""

    _PREFIX = "engram:ui:signed-out:"

    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    def end(self, session: Session, ttl_s: int) -> None:
        with translated_errors():
            self._redis.set(self._PREFIX + session.id, 1, ex=max(1, ttl_s))

    def ended(self, session: Session) -> bool:
        with translated_errors():
            return bool(self._redis.exists(self._PREFIX + session.id))


class Sessions:
    """Makes and reads the sign-in tokens."""

    def __init__(self, secret: str, max_age_s: int) -> None:
        self._serializer = URLSafeTimedSerializer(secret, salt=_SALT)
        self._notices = URLSafeTimedSerializer(secret, salt=_NOTICE_SALT)
        self.max_age_s = max_age_s

    @classmethod
    def of(cls, settings: Settings) -> Sessions:
        if settings.ui_session_key is not None:
            secret = settings.ui_session_key.get_secret_value()
        else:
            path = settings.data_dir / secrets.SECRETS_FOLDER / SESSION_KEY_FILE
            secret = secrets.ensure(path).get_secret_value()
        return cls(secret, settings.ui_session_s)

    def start(self, key_id: str | None, tenant: str | None) -> tuple[Session, str]:
        """A new session and its token (a fresh CSRF token with each sign-in)."""
        session = Session(key_id=key_id, tenant=tenant, csrf=token_source.token_urlsafe(24))
        token = self._serializer.dumps({"k": key_id, "t": tenant, "c": session.csrf})
        return session, token

    def notice(self, text: str) -> str:
        """A notice of the server's for the next page, signed: ``/ui?notice=`` shows no other text."""
        return self._notices.dumps(text)

    def read_notice(self, token: str | None) -> str | None:
        """The notice a token holds, or None if the server did not write it (or long ago)."""
        if not token:
            return None
        try:
            text = self._notices.loads(token, max_age=NOTICE_S)
        except BadSignature:
            return None
        return text if isinstance(text, str) else None

    def read(self, token: str | None) -> Session | None:
        """The session a token names, or None if it is absent, altered, of another secret or expired."""
        if not token:
            return None
        try:
            payload = self._serializer.loads(token, max_age=self.max_age_s)
        except BadSignature:  # SignatureExpired is one
            return None
        if not isinstance(payload, dict):
            return None
        key_id, tenant, csrf = payload.get("k"), payload.get("t"), payload.get("c")
        if not isinstance(csrf, str) or not all(v is None or isinstance(v, str) for v in (key_id, tenant)):
            return None
        return Session(key_id=key_id, tenant=tenant, csrf=csrf)
