"""Redis through Sentinels: the settings, and every client asking them for the primary (no service
reached; the failover itself is tests/scaleout/test_sentinel_failover.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kombu import Connection
from redis.asyncio.sentinel import SentinelConnectionPool as AsyncSentinelPool
from redis.sentinel import SentinelConnectionPool

from shared import redis_client
from shared.errors import ConfigurationError
from shared.settings import Settings
from workers import fair_share
from workers.app import make_app

SENTINELS = "10.0.0.1:26379, 10.0.0.2:26380,sentinel-3:26381"


def _settings(tmp_path: Path, **fields: object) -> Settings:
    values: dict[str, object] = {
        "_env_file": None,
        "data_dir": tmp_path,
        "redis_url": "redis://engram@127.0.0.1:6379/3",
        "redis_password": "node-secret",
        "redis_sentinels": SENTINELS,
        "redis_sentinel_master": "primary-a",
        "redis_sentinel_password": "sentinel-secret",
    }
    values.update(fields)
    return Settings(**values)  # type: ignore[arg-type]


def test_sentinels_are_read_as_hosts_and_ports(tmp_path: Path) -> None:
    settings = _settings(tmp_path)

    assert settings.redis_sentinels == "10.0.0.1:26379,10.0.0.2:26380,sentinel-3:26381"
    assert settings.redis_sentinel_nodes == [("10.0.0.1", 26379), ("10.0.0.2", 26380), ("sentinel-3", 26381)]


def test_no_sentinels_is_plain_redis(tmp_path: Path) -> None:
    settings = Settings(_env_file=None, data_dir=tmp_path)

    assert settings.redis_sentinel_nodes == []
    assert settings.redis_sentinel_master == "engram"
    assert redis_client.transport_options(settings) == {}
    assert redis_client.celery_config(settings)["broker_url"] == settings.redis_url


@pytest.mark.parametrize("bad", ["10.0.0.1", "10.0.0.1:port", ":26379", "h:0", "h:70000"])
def test_a_sentinel_that_is_not_host_and_port_is_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ConfigurationError, match="ENGRAM_REDIS_SENTINELS"):
        _settings(tmp_path, redis_sentinels=f"127.0.0.1:26379,{bad}")


def test_an_empty_sentinel_password_is_none(tmp_path: Path) -> None:
    assert _settings(tmp_path, redis_sentinel_password="").redis_sentinel_password is None


def test_a_client_asks_the_sentinels_for_the_primary_with_the_nodes_credentials(tmp_path: Path) -> None:
    client = redis_client.connect(_settings(tmp_path), timeout_s=7, connect_timeout_s=3)

    pool = client.connection_pool
    assert isinstance(pool, SentinelConnectionPool)
    assert pool.service_name == "primary-a" and pool.is_master
    manager = pool.sentinel_manager
    assert [
        (s.connection_pool.connection_kwargs["host"], s.connection_pool.connection_kwargs["port"])
        for s in manager.sentinels
    ] == [("10.0.0.1", 26379), ("10.0.0.2", 26380), ("sentinel-3", 26381)]
    # The Sentinels get their own password and a bound; the data nodes the Redis password and the URL's db
    assert manager.sentinel_kwargs == {
        "socket_timeout": 3,
        "socket_connect_timeout": 3,
        "password": "sentinel-secret",
    }
    kwargs = pool.connection_kwargs
    assert kwargs["credential_provider"].get_credentials() == ("engram", "node-secret")
    assert (kwargs["db"], kwargs["socket_timeout"], kwargs["socket_connect_timeout"]) == (3, 7, 3)
    assert "node-secret" not in repr(client) and "sentinel-secret" not in repr(client)


def test_the_sentinels_without_a_password_are_asked_without_one(tmp_path: Path) -> None:
    client = redis_client.connect(_settings(tmp_path, redis_sentinel_password=None))

    manager = client.connection_pool.sentinel_manager
    assert "password" not in manager.sentinel_kwargs


def test_the_apps_async_clients_ask_the_sentinels_and_the_pooled_one_waits(tmp_path: Path) -> None:
    settings = _settings(tmp_path)

    pooled = redis_client.connect_async(settings, max_connections=4, socket_timeout=5)
    single = redis_client.connect_async(settings, socket_connect_timeout=2)

    assert isinstance(pooled.connection_pool, AsyncSentinelPool)
    assert pooled.connection_pool.max_connections == 4
    assert pooled.connection_pool.timeout is None  # type: ignore[attr-defined]  # waits, bounded by the caller
    assert pooled.connection_pool.connection_kwargs["db"] == 3
    assert type(single.connection_pool) is AsyncSentinelPool
    assert single.connection_pool.service_name == "primary-a"
    asyncio.run(pooled.aclose())
    asyncio.run(single.aclose())


def test_the_apps_async_clients_without_sentinels_keep_the_url(tmp_path: Path) -> None:
    settings = Settings(_env_file=None, data_dir=tmp_path, redis_url="redis://127.0.0.1:6390/2")

    pooled = redis_client.connect_async(settings, max_connections=4)

    assert pooled.connection_pool.connection_kwargs["port"] == 6390
    assert pooled.connection_pool.max_connections == 4
    asyncio.run(pooled.aclose())


def test_celery_lists_the_sentinels_and_names_the_primary(tmp_path: Path) -> None:
    settings = _settings(tmp_path)

    config = redis_client.celery_config(settings)

    expected = (
        "sentinel://:node-secret@10.0.0.1:26379/3;sentinel://:node-secret@10.0.0.2:26380/3;"
        "sentinel://:node-secret@sentinel-3:26381/3"
    )
    assert config["broker_url"] == config["result_backend"] == expected
    assert config["broker_password"] == config["redis_password"] == "node-secret"
    assert redis_client.transport_options(settings) == {
        "master_name": "primary-a",
        "sentinel_kwargs": {"socket_timeout": 5, "socket_connect_timeout": 5, "password": "sentinel-secret"},
    }


def test_the_apps_transport_options_keep_the_fair_share_beside_the_sentinels(tmp_path: Path) -> None:
    settings = _settings(tmp_path)

    app = make_app(settings)

    broker = app.conf.broker_transport_options
    assert broker["master_name"] == app.conf.result_backend_transport_options["master_name"] == "primary-a"
    assert broker["priority_steps"] == fair_share.broker_options()["priority_steps"]
    assert broker["visibility_timeout"] == settings.visibility_timeout_s
    assert broker["sentinel_kwargs"]["password"] == "sentinel-secret"


def _broker(tmp_path: Path) -> Connection:
    """kombu's connection as the workers make it from the Sentinel settings."""
    settings = _settings(tmp_path)
    config = redis_client.celery_config(settings)
    return Connection(
        config["broker_url"],
        password=config["broker_password"],
        transport_options=redis_client.transport_options(settings),
    )


def test_kombu_takes_the_sentinel_transport_with_every_sentinel(tmp_path: Path) -> None:
    with _broker(tmp_path) as connection:
        assert connection.transport_cls == "sentinel"
        assert len(connection.alt) == 3
        assert "node-secret" not in connection.as_uri()


def test_kombu_keeps_the_password_when_it_moves_to_the_next_sentinel(tmp_path: Path) -> None:
    """A lost primary makes kombu switch to the next URL of the list, whose credentials replace the
    connection's: the promoted replica must still be asked with the password."""
    with _broker(tmp_path) as connection:
        connection.maybe_switch_next()
        connection.maybe_switch_next()

        assert connection.password == "node-secret"
        assert connection.transport_cls == "sentinel"
        assert "node-secret" not in connection.as_uri()
