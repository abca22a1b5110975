"""How every process reaches Redis: the one place that turns settings into connection arguments.

redis-py clients (staging, progress, versions, health), Celery's broker and result backend, and
the ops scripts' redis-cli (through ``ops/redis_auth.py``) all take the URL and the password from
here. The password is passed beside the URL, never inside it, so no URL Celery or kombu prints
(the worker banner, a connection error) can hold it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis
from pydantic import SecretStr
from redis.credentials import CredentialProvider

from shared.errors import ServiceUnavailable
from shared.settings import Settings

START_HINT = "start it with ./ops/demo, or set ENGRAM_REDIS_URL"
AUTH_HINT = (
    "set ENGRAM_REDIS_PASSWORD, or run where ENGRAM_DATA_DIR holds the secrets/redis.password "
    "that ./ops/demo made"
)
FULL_HINT = (
    "Redis is at its maxmemory and evicts nothing (the queues must not lose tasks): try again once "
    "the workers have drained the queues, or raise maxmemory"
)


def out_of_memory(exc: redis.OutOfMemoryError) -> ServiceUnavailable:
    """Redis refusing a write at its maxmemory: a transient 503, not a failure of the request."""
    return ServiceUnavailable("redis", f"out of memory (maxmemory reached): {exc}", FULL_HINT)


def out_of_memory_in(exc: BaseException) -> redis.OutOfMemoryError | None:
    """The OOM refusal under another library's error (kombu wraps it in its OperationalError)."""
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None or isinstance(seen, redis.OutOfMemoryError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def password(settings: Settings) -> str | None:
    return settings.redis_password.get_secret_value() if settings.redis_password else None


class Credentials(CredentialProvider):
    """The user (if the URL names one) and password, handed to redis-py at each connection.

    Given as a provider rather than ``password=``: redis-py's pool repr prints its connection
    arguments, a password among them, and a repr ends up in a log or a test report sooner or later.
    """

    def __init__(self, username: str | None, secret: SecretStr) -> None:
        self._username = username
        self._secret = secret

    def get_credentials(self) -> tuple[str] | tuple[str, str]:
        if self._username:
            return self._username, self._secret.get_secret_value()
        return (self._secret.get_secret_value(),)

    async def get_credentials_async(self) -> tuple[str] | tuple[str, str]:
        # redis-py's default logs a warning at every connection of an asyncio client.
        return self.get_credentials()

    def __repr__(self) -> str:
        return f"Credentials(username={self._username!r}, password='**********')"


def client_url_and_kwargs(settings: Settings) -> tuple[str, dict[str, Any]]:
    """The URL and the keyword arguments of ``redis.Redis.from_url`` for these settings: with a
    password, the URL's user moves into the credentials (redis-py takes one or the other)."""
    if settings.redis_password is None:
        return settings.redis_url, {}
    parts = urlsplit(settings.redis_url)
    netloc = parts.netloc.rpartition("@")[2]
    url = urlunsplit(parts._replace(netloc=netloc))
    return url, {"credential_provider": Credentials(parts.username, settings.redis_password)}


def connect(settings: Settings, timeout_s: float = 10, connect_timeout_s: float = 5) -> redis.Redis:
    url, kwargs = client_url_and_kwargs(settings)
    return redis.Redis.from_url(
        url, socket_timeout=timeout_s, socket_connect_timeout=connect_timeout_s, **kwargs
    )


def celery_config(settings: Settings) -> dict[str, Any]:
    """Celery settings for the broker and the result backend: the URL, and the password apart
    (``broker_password`` for kombu, ``redis_password`` for the result backend). kombu masks it
    in every URL it prints (the worker banner, connection errors)."""
    secret = password(settings)
    return {
        "broker_url": settings.redis_url,
        "result_backend": settings.redis_url,
        "broker_password": secret,
        "redis_password": secret,
    }


def requirepass_line(secret: SecretStr) -> str:
    """``requirepass "..."`` as redis-server's config parser reads it (ops/ feeds it on stdin): a
    double-quoted string in which a quote, a backslash and control characters are escaped."""
    escaped = []
    for char in secret.get_secret_value():
        if char in '"\\':
            escaped.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            escaped.append(f"\\x{ord(char):02x}")
        else:
            escaped.append(char)
    return f'requirepass "{"".join(escaped)}"\n'


@contextmanager
def translated_errors() -> Iterator[None]:
    try:
        yield
    except redis.AuthenticationError as exc:  # NOAUTH or WRONGPASS: reachable, but not ours
        raise ServiceUnavailable("redis", f"authentication refused: {exc}", AUTH_HINT) from exc
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise ServiceUnavailable("redis", str(exc), START_HINT) from exc
    except redis.OutOfMemoryError as exc:
        raise out_of_memory(exc) from exc
