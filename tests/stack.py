"""The real stack's fixtures, shared by tests/integration and tests/scaleout (registered in
tests/conftest.py): the Redis and Neo4j that ops/test started, real Celery workers, keys, the app.

The workers are processes started here, one per queue as ops/ runs them, so a test can stop one,
restart it with other settings (Qdrant unreachable, say) and read the embedded Qdrant folder while
its owner is paused. Every test works in a tenant of its own, so tests never see each other's data.
Nothing here is autouse: unit tests never reach a service.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import neo4j
import pytest
import redis
from fastapi.testclient import TestClient

from producers.http import app as api_module
from producers.http import deps, health
from shared.auth import NewKey
from shared.redis_client import connect
from shared.settings import Settings
from tests.integration import log_secrets
from tests.integration.support import APP_URL, WORKERS, KeyMaker, Workers


def _settings() -> Settings:
    return Settings()


@pytest.fixture(scope="session")
def settings() -> Settings:
    s = _settings()
    if "engram-test" not in str(s.data_dir):
        pytest.exit("integration tests run through ./ops/test, which sets up their own services", 2)
    return s


@pytest.fixture(scope="session")
def redis_client(settings: Settings) -> Iterator[redis.Redis]:
    client = connect(settings)
    try:
        client.ping()
    except redis.ConnectionError as exc:
        pytest.exit(f"Redis is not running at {settings.redis_url}: run ./ops/test ({exc})", 2)
    client.flushdb()
    yield client
    client.close()


@pytest.fixture(scope="session")
def neo4j_driver(settings: Settings) -> Iterator[neo4j.Driver]:
    driver = neo4j.GraphDatabase.driver(
        settings.neo4j_uri, auth=(settings.neo4j_user, settings.neo4j_password.get_secret_value())
    )
    try:
        driver.verify_connectivity()
    except Exception as exc:
        pytest.exit(f"Neo4j is not running at {settings.neo4j_uri}: run ./ops/test ({exc})", 2)
    yield driver
    driver.close()


_started: list[Workers] = []
"""The session's stack workers, once a test has asked for them (``without_stack_workers``)."""


@pytest.fixture(scope="session")
def workers(settings: Settings, redis_client: redis.Redis, neo4j_driver: neo4j.Driver) -> Iterator[Workers]:
    running = Workers(settings)
    _started.append(running)
    try:
        for name in WORKERS:
            running.start(name)
        yield running
    finally:
        running.stop_all()
        _started.remove(running)


@pytest.fixture
def without_stack_workers() -> Iterator[None]:
    """None of the stack's own workers takes from the queues while a test runs worker groups of
    its own (tests/scaleout/test_second_host.py): a third group on the same queues, started for the
    session by an earlier test, would take the groups' work and write it to its embedded Qdrant.
    Those stopped here start again after the test."""
    paused = [(group, group.running()) for group in _started]
    for group, names in paused:
        for name in names:
            group.stop(name)
    try:
        yield
    finally:
        for group, names in paused:
            for name in names:
                group.start(name)


@pytest.fixture(scope="session")
def keys(settings: Settings, neo4j_driver: neo4j.Driver) -> Iterator[KeyMaker]:
    """Makes API keys in the test Neo4j, as ``engram keys create`` does."""
    from producers.client import EngramClient

    client = EngramClient(settings)

    def make(tenant: str | None, signing: bool = False) -> NewKey:
        made = client.create_key("test", tenant, signing=signing)
        log_secrets.remember(made.key)
        log_secrets.remember(made.signing_secret)
        return made

    yield make
    client.close()


@pytest.fixture(scope="session")
def api(workers: Workers, keys: KeyMaker) -> Iterator[TestClient]:
    """The HTTP app, called with an admin key (tests name the tenant in each request)."""
    from producers.http.app import app

    headers = {"Authorization": f"Bearer {keys(None).key}"}
    with TestClient(app, base_url=APP_URL, headers=headers) as client:
        yield client


@pytest.fixture
def tenant() -> str:
    return f"tenant-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def use_settings() -> Iterator[Callable[[Settings], None]]:
    """Makes /healthz probe with these settings until the test ends."""
    made: list[health.Probes] = []

    def use(settings: Settings) -> None:
        made.append(health.default_probes(settings))
        api_module.app.dependency_overrides[deps.probes] = lambda: made[-1]

    yield use
    api_module.app.dependency_overrides.clear()
    for probes in made:
        probes.close()
