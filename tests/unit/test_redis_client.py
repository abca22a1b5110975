"""The one place that turns settings into Redis connection arguments: the password beside the URL."""

from __future__ import annotations

from pathlib import Path

import fakeredis
import pytest
import redis
from pydantic import SecretStr

from shared import redis_client
from shared.errors import ServiceUnavailable
from shared.settings import Settings


def test_a_client_authenticates_with_the_password_and_keeps_the_url(tmp_path: Path) -> None:
    settings = Settings(
        _env_file=None, data_dir=tmp_path, redis_url="redis://127.0.0.1:6379/0", redis_password="redis-secret"
    )

    client = redis_client.connect(settings)

    kwargs = client.connection_pool.connection_kwargs
    assert kwargs["credential_provider"].get_credentials() == ("redis-secret",)
    assert kwargs.get("password") is None
    assert (kwargs["host"], kwargs["port"], kwargs["db"]) == ("127.0.0.1", 6379, 0)
    assert "redis-secret" not in repr(client)  # redis-py's repr prints the pool's arguments


def test_a_user_of_the_url_goes_with_the_password(tmp_path: Path) -> None:
    settings = Settings(
        _env_file=None, data_dir=tmp_path, redis_url="redis://engram@cache:6380/2", redis_password="pw"
    )

    kwargs = redis_client.connect(settings).connection_pool.connection_kwargs

    assert kwargs["credential_provider"].get_credentials() == ("engram", "pw")
    assert kwargs.get("username") is None
    assert (kwargs["host"], kwargs["port"], kwargs["db"]) == ("cache", 6380, 2)


def test_no_password_sends_none(tmp_path: Path) -> None:
    client = redis_client.connect(Settings(_env_file=None, data_dir=tmp_path))

    kwargs = client.connection_pool.connection_kwargs
    assert kwargs.get("password") is None and kwargs.get("credential_provider") is None


def test_the_credentials_authenticate_against_a_redis_that_asks(tmp_path: Path) -> None:
    # Given a Redis that asks for a password, and a client made by connect with it
    server = fakeredis.FakeServer()
    fakeredis.FakeRedis(server=server).config_set("requirepass", "redis-secret")
    url, kwargs = redis_client.client_url_and_kwargs(
        Settings(_env_file=None, data_dir=tmp_path, redis_password="redis-secret")
    )

    # Then its calls are answered
    assert fakeredis.FakeRedis.from_url(url, server=server, **kwargs).ping() is True


def test_celery_gets_the_password_apart_from_the_url(tmp_path: Path) -> None:
    settings = Settings(_env_file=None, data_dir=tmp_path, redis_password="redis-secret")

    config = redis_client.celery_config(settings)

    assert config["broker_url"] == config["result_backend"] == settings.redis_url
    assert config["broker_password"] == config["redis_password"] == "redis-secret"


def test_a_refused_password_is_unavailable_with_a_hint_and_no_secret() -> None:
    # Given a Redis that asks for a password the client does not give
    server = fakeredis.FakeServer()
    fakeredis.FakeRedis(server=server).config_set("requirepass", "the-right-one")
    client = fakeredis.FakeRedis(server=server, password="a-wrong-one")

    # When a call is made through the translation
    with pytest.raises(ServiceUnavailable) as refused, redis_client.translated_errors():
        client.ping()

    # Then it names Redis and the settings to check, and shows neither password
    assert refused.value.service == "redis"
    assert "authentication refused" in str(refused.value)
    assert "ENGRAM_REDIS_PASSWORD" in str(refused.value)
    assert "the-right-one" not in str(refused.value) and "a-wrong-one" not in str(refused.value)
    assert isinstance(refused.value.__cause__, redis.AuthenticationError)


@pytest.mark.parametrize(
    ("password", "line"),
    [
        ("plain-Token_09", 'requirepass "plain-Token_09"\n'),
        ('a"b\\c d', 'requirepass "a\\"b\\\\c d"\n'),
        ("tab\there\n", 'requirepass "tab\\x09here\\x0a"\n'),
    ],
)
def test_the_redis_server_config_line_quotes_any_password(password: str, line: str) -> None:
    assert redis_client.requirepass_line(SecretStr(password)) == line
