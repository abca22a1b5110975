"""The test Redis asks for the password of its data folder: strangers are refused, the pipeline works.

ops/test started it as ops/demo starts the demo's: the password made in .engram-test/secrets and
handed to redis-server on stdin. The workers and the app found it with no variable set.
"""

from __future__ import annotations

import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient

from shared.settings import Settings
from tests.integration.support import Workers, wait_until_finished

pytestmark = pytest.mark.integration


def _password(settings: Settings) -> str:
    assert settings.redis_password is not None, "ops/test starts Redis with a password"
    return settings.redis_password.get_secret_value()


def test_a_client_without_the_password_is_refused(settings: Settings, redis_client: redis.Redis) -> None:
    # Given the test Redis, holding staged data
    redis_client.set("engram:batch:auth-probe:documents", b"private text", ex=60)

    # When a client without the password, or with another, asks for it
    stranger = redis.Redis.from_url(settings.redis_url, socket_timeout=5)
    guesser = redis.Redis.from_url(settings.redis_url, password="not-the-password", socket_timeout=5)

    # Then Redis refuses both (NOAUTH, WRONGPASS), while the password's holder reads it
    with pytest.raises(redis.AuthenticationError, match="Authentication required"):
        stranger.get("engram:batch:auth-probe:documents")
    with pytest.raises(redis.AuthenticationError):
        guesser.ping()
    assert redis_client.get("engram:batch:auth-probe:documents") == b"private text"
    stranger.close()
    guesser.close()


def test_the_password_is_kept_in_the_data_folder_for_its_owner_alone(settings: Settings) -> None:
    path = settings.redis_password_file

    assert path == settings.data_dir / "secrets" / "redis.password"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert path.read_text().strip() == _password(settings)


def _command_lines() -> Iterator[tuple[int, bytes]]:
    for process in Path("/proc").iterdir():
        if process.name.isdigit():
            try:
                yield int(process.name), (process / "cmdline").read_bytes()
            except OSError:
                continue


def test_the_password_shows_on_no_command_line_and_in_no_log(settings: Settings, workers: Workers) -> None:
    # Given Redis, Neo4j and the workers running
    secret = _password(settings).encode()

    # Then no process's command line holds the password (ps shows them to every user)
    assert [pid for pid, line in _command_lines() if secret in line] == []
    # and no log of the data folder does (the workers print their broker, masked)
    logs = list((settings.data_dir / "logs").glob("*.log"))
    assert any(b"redis://:**@" in log.read_bytes() for log in logs)
    assert [log.name for log in logs if secret in log.read_bytes()] == []


def test_the_pipeline_works_with_the_password(api: TestClient, tenant: str) -> None:
    # Given a document posted through the app, whose workers authenticate from the data folder
    text = "The lighthouse keeper logs the passing ships in a green ledger every evening at six."
    response = api.post("/api/documents", json={"user_id": tenant, "id": "ledger", "text": text})
    assert response.status_code == 202, response.text

    # When the pipeline has finished it
    statuses = wait_until_finished(api, tenant, ["ledger"])

    # Then it is stored and found
    assert statuses["ledger"]["state"] == "done"
    found = api.post(
        "/api/memory/semantic-search",
        json={"query": "who records the ships", "user_id": tenant, "top_k": 1},
    )
    assert found.status_code == 200, found.text
    assert found.json()["results"][0]["document_id"] == "ledger"


def test_healthz_reports_redis_down_when_it_refuses_the_password(
    api: TestClient, settings: Settings, use_settings: Callable[[Settings], None]
) -> None:
    # Given probes without the password
    use_settings(settings.model_copy(update={"redis_password": None}))

    # When the app is asked how it is
    response = api.get("/healthz")

    # Then Redis is down for it, and the answer says why without the password
    assert response.status_code == 503, response.text
    body = response.json()
    assert "redis" in body["down"]
    assert "Authentication" in body["redis"]["detail"]
    assert _password(settings) not in response.text
