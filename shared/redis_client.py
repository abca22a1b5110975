"""How every process reaches Redis: the one place that turns settings into connection arguments.

redis-py clients (staging, progress, versions, health, the app's result waits), Celery's broker
and result backend, and the ops scripts' redis-cli (through ``ops/redis_auth.py``) all take the URL
and the password from here. The password is passed beside the URL, never inside it, so no URL
Celery or kombu prints (the worker banner, a connection error) can hold it.

With ``ENGRAM_REDIS_SENTINELS`` set, every client asks the Sentinels for the primary (redis-py's
``Sentinel.master_for``, kombu's and Celery's ``sentinel://`` transports) and asks again after a
failover; the URL then gives only the database and the user.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast
from urllib.parse import quote, urlsplit, urlunsplit

import redis
import redis.asyncio as aioredis
from pydantic import SecretStr
from redis.asyncio.connection import BlockingConnectionPool
from redis.asyncio.sentinel import Sentinel as AsyncSentinel
from redis.asyncio.sentinel import SentinelConnectionPool as AsyncSentinelPool
from redis.credentials import CredentialProvider
from redis.sentinel import Sentinel

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


def _database(settings: Settings) -> int:
    path = urlsplit(settings.redis_url).path.strip("/")
    return int(path) if path.isdigit() else 0


def sentinel_kwargs(settings: Settings, timeout_s: float) -> dict[str, Any]:
    """How a client talks to the Sentinels themselves: their own password, and a bound on each
    question (redis-py gives them no timeout when these arguments are given)."""
    kwargs: dict[str, Any] = {"socket_timeout": timeout_s, "socket_connect_timeout": timeout_s}
    if settings.redis_sentinel_password is not None:
        kwargs["password"] = settings.redis_sentinel_password.get_secret_value()
    return kwargs


def _node_kwargs(settings: Settings) -> dict[str, Any]:
    """The data nodes' arguments when the Sentinels name them: the URL's database, the credentials."""
    kwargs: dict[str, Any] = {"db": _database(settings)}
    if settings.redis_password is not None:
        username = urlsplit(settings.redis_url).username
        kwargs["credential_provider"] = Credentials(username, settings.redis_password)
    return kwargs


def connect(settings: Settings, timeout_s: float = 10, connect_timeout_s: float = 5) -> redis.Redis:
    """A client of the primary: at the URL, or the one the Sentinels name (asked again at each new
    connection, so a failover costs the calls in flight a ConnectionError, not the client)."""
    timeouts = {"socket_timeout": timeout_s, "socket_connect_timeout": connect_timeout_s}
    if settings.redis_sentinel_nodes:
        sentinels = Sentinel(  # type: ignore[no-untyped-call]
            settings.redis_sentinel_nodes, sentinel_kwargs=sentinel_kwargs(settings, connect_timeout_s)
        )
        master = sentinels.master_for(  # type: ignore[no-untyped-call]
            settings.redis_sentinel_master, **timeouts, **_node_kwargs(settings)
        )
        return cast(redis.Redis, master)
    url, kwargs = client_url_and_kwargs(settings)
    return redis.Redis.from_url(url, **timeouts, **kwargs)


class _BlockingSentinelPool(AsyncSentinelPool, BlockingConnectionPool):
    """The Sentinels' pool that waits for a free connection, as ``BlockingConnectionPool`` does."""


def connect_async(settings: Settings, max_connections: int | None = None, **kwargs: Any) -> aioredis.Redis:
    """An asyncio client of the primary, as :func:`connect`; with ``max_connections`` its pool
    waits for a free connection (for as long as the caller's own deadline) instead of refusing."""
    blocking: dict[str, Any] = (
        {"max_connections": max_connections, "timeout": None} if max_connections else {}
    )
    if settings.redis_sentinel_nodes:
        sentinels = AsyncSentinel(  # type: ignore[no-untyped-call]
            settings.redis_sentinel_nodes,
            sentinel_kwargs=sentinel_kwargs(settings, kwargs.get("socket_connect_timeout") or 5),
        )
        pool_class = _BlockingSentinelPool if blocking else AsyncSentinelPool
        master = sentinels.master_for(
            settings.redis_sentinel_master,
            connection_pool_class=pool_class,
            **blocking,
            **_node_kwargs(settings),
            **kwargs,
        )
        return cast(aioredis.Redis, master)
    url, credentials = client_url_and_kwargs(settings)
    if blocking:
        pool = BlockingConnectionPool.from_url(url, **credentials, **blocking, **kwargs)
        return aioredis.Redis(connection_pool=pool)
    return cast(aioredis.Redis, aioredis.Redis.from_url(url, **credentials, **kwargs))


def celery_config(settings: Settings) -> dict[str, Any]:
    """Celery settings for the broker and the result backend: the URL, and the password apart
    (``broker_password`` for kombu, ``redis_password`` for the result backend). kombu masks it
    in every URL it prints (the worker banner, connection errors). With Sentinels, the URL lists
    them (``sentinel://:pw@h1:p1/db;sentinel://:pw@h2:p2/db``) and :func:`transport_options` names
    the primary. There the password is in each URL, never in a setting: when the primary is lost,
    kombu moves to the next URL of the list and reads its credentials from it alone (kombu 5.7,
    ``Connection.switch``), so a password given apart is dropped and the promoted replica refuses
    every worker (the Sentinel fault row found it). kombu masks it wherever it prints a URL."""
    secret = password(settings)
    url = settings.redis_url
    if settings.redis_sentinel_nodes:
        db = _database(settings)
        auth = f":{quote(secret, safe='')}@" if secret else ""
        url = ";".join(f"sentinel://{auth}{host}:{port}/{db}" for host, port in settings.redis_sentinel_nodes)
    return {"broker_url": url, "result_backend": url, "broker_password": secret, "redis_password": secret}


def transport_options(settings: Settings) -> dict[str, Any]:
    """What kombu's and Celery's Sentinel transports need beside the URL (merged into the broker's
    and the result backend's transport options): the primary's name and how to ask the Sentinels.
    Empty without Sentinels."""
    if not settings.redis_sentinel_nodes:
        return {}
    return {
        "master_name": settings.redis_sentinel_master,
        "sentinel_kwargs": sentinel_kwargs(settings, timeout_s=5),
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
