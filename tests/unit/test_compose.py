"""docker-compose.yml publishes the app alone, on loopback, and every store asks for its secret.

Read as YAML (anchors merged), the way compose sees the file before interpolation; the full
check is `docker compose config` (docs/operations/production.md: how to run it without Docker).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"
SECRETS = ("ENGRAM_NEO4J_PASSWORD", "ENGRAM_REDIS_PASSWORD", "ENGRAM_QDRANT_API_KEY")


def _compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def _words(value: Any) -> str:
    return " ".join(value) if isinstance(value, list) else str(value or "")


def test_only_the_app_and_flower_publish_a_port_and_on_loopback_unless_configured() -> None:
    services = _compose()["services"]

    published = {name: service["ports"] for name, service in services.items() if "ports" in service}

    assert list(published) == ["api", "flower"]
    assert published["flower"] == ["127.0.0.1:${ENGRAM_FLOWER_PORT:-5555}:5555"]
    assert published["api"] == ["${ENGRAM_PUBLISH_ADDRESS:-127.0.0.1}:${ENGRAM_PUBLISH_PORT:-8000}:8000"]
    # inside its container the app listens on every interface of the project network
    command = services["api"]["command"]
    assert command[command.index("--host") + 1] == "0.0.0.0"
    assert command[command.index("--port") + 1] == "8000"


def test_every_engram_service_requires_the_three_secrets() -> None:
    services = _compose()["services"]
    engram = {name: s for name, s in services.items() if s.get("image") == "engram:latest"}

    assert set(engram) >= {"api", "beat", "worker-ingest", "worker-embed", "worker-write"}
    for name, service in engram.items():
        environment = service["environment"]
        assert environment["ENGRAM_ENV"] == "production", name
        for secret in SECRETS:
            assert environment[secret].startswith("${" + secret + ":?"), (name, secret)
        assert "@" not in environment["ENGRAM_REDIS_URL"], name


def test_redis_asks_for_the_password_it_reads_from_a_config_not_its_command_line() -> None:
    compose = _compose()
    redis = compose["services"]["redis"]

    target = redis["configs"][0]["target"]
    assert redis["command"][:2] == ["redis-server", target]
    assert compose["configs"]["redis-auth"]["content"].startswith('requirepass "${ENGRAM_REDIS_PASSWORD:?')
    assert redis["environment"]["REDISCLI_AUTH"].startswith("${ENGRAM_REDIS_PASSWORD:?")
    assert "redis-cli ping" in _words(redis["healthcheck"]["test"])


def test_qdrant_asks_for_the_api_key() -> None:
    qdrant = _compose()["services"]["qdrant"]

    assert qdrant["environment"]["QDRANT__SERVICE__API_KEY"].startswith("${ENGRAM_QDRANT_API_KEY:?")
    assert "api-key" in _words(qdrant["healthcheck"]["test"])


def test_no_secret_is_on_a_command_line() -> None:
    for name, service in _compose()["services"].items():
        command = _words(service.get("command")) + _words(service.get("entrypoint"))
        assert not any(secret in command for secret in SECRETS), name
        assert "requirepass" not in command, name


def test_every_engram_service_shares_the_metrics_volume_and_logs_json() -> None:
    compose = _compose()
    engram = {name: s for name, s in compose["services"].items() if s.get("image") == "engram:latest"}

    assert "flower" in engram
    for name, service in engram.items():
        assert "metrics:/var/lib/engram-metrics" in service["volumes"], name
        assert service["environment"]["ENGRAM_METRICS_DIR"] == "/var/lib/engram-metrics", name
        assert service["environment"]["ENGRAM_LOG_FORMAT"] == "${ENGRAM_LOG_FORMAT:-json}", name
    # memory only: the counters start again with the project, never left from an earlier run
    assert compose["volumes"]["metrics"]["driver_opts"]["type"] == "tmpfs"
    assert "--quiet" in compose["services"]["beat"]["command"]


def test_the_worker_host_profile_runs_every_queue_with_the_qdrant_server_and_no_beat() -> None:
    compose = _compose()
    services = compose["services"]
    main = {n: s for n, s in services.items() if n.startswith("worker-")}
    host = {n: s for n, s in services.items() if "worker-host" in s.get("profiles", [])}

    # the same queues as the main group's workers, each node named after the host
    def queues(group: dict[str, Any]) -> set[str]:
        return {s["command"][s["command"].index("-Q") + 1] for s in group.values()}

    assert queues(host) == queues(main) == {"ingest", "embed", "write", "reconcile", "query"}
    for name, service in host.items():
        command = service["command"]
        queue = command[command.index("-Q") + 1]
        assert command[command.index("-n") + 1] == f"{queue}@${{WORKER_HOST_NAME:-host2}}-%h", name
        assert f"-d {queue}@${{WORKER_HOST_NAME:-host2}}-$$HOSTNAME" in _words(service["healthcheck"]["test"])
        environment = service["environment"]
        # a worker host never opens an embedded Qdrant folder, stops as the main workers do
        assert environment["ENGRAM_QDRANT_URL"].startswith("${WORKER_HOST_QDRANT_URL:-"), name
        assert environment["REMAP_SIGTERM"] == "SIGQUIT", name
        assert service["stop_grace_period"] == services["worker-write"]["stop_grace_period"], name
        # it may join stores of another machine: it waits on none of this project's
        assert "depends_on" not in service, name
    # every other service runs without the profile; beat never with it
    assert all(not s.get("profiles") for n, s in services.items() if n not in host)
