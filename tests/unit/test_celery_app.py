"""The Celery app's configuration holds the reliability settings, and importing it is inert."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from kombu.transport.redis import Channel

from shared.settings import Settings, get_settings
from workers import fair_share
from workers.app import (
    CHUNK_TASK,
    DROP_COLLECTION_TASK,
    EMBED_TASK,
    FALLBACK_TASK,
    QUEUES,
    RECONCILE_TASK,
    REEMBED_TASK,
    RESTORE_TASK,
    SEARCH_TASK,
    SYNC_TASK,
    TASK_MODULES,
    WRITE_TASK,
    app,
    make_app,
)

ROOT = Path(__file__).resolve().parents[2]


def test_tasks_are_acknowledged_late_and_requeued_if_the_worker_dies() -> None:
    assert app.conf.task_acks_late is True
    assert app.conf.task_reject_on_worker_lost is True
    assert app.conf.worker_prefetch_multiplier == 1


def test_visibility_timeout_is_set_for_broker_and_results_and_outlasts_the_time_limit() -> None:
    settings = get_settings()

    broker = app.conf.broker_transport_options["visibility_timeout"]
    results = app.conf.result_backend_transport_options["visibility_timeout"]

    assert broker == results == settings.visibility_timeout_s
    assert broker > app.conf.task_time_limit
    assert app.conf.task_time_limit == settings.task_time_limit_s
    assert app.conf.task_soft_time_limit == settings.task_soft_time_limit_s


def test_a_dead_workers_task_is_looked_for_every_ten_seconds_past_the_visibility_timeout() -> None:
    # Kombu's workers look every ``unacked_restore_interval`` seconds but scan only one look in
    # ``unacked_restore_throttle``: the settings' bound (pipeline.py) counts 10 s past the timeout
    options = app.conf.broker_transport_options
    interval = options.get("unacked_restore_interval", Channel.unacked_restore_interval)
    throttle = options.get("unacked_restore_throttle", Channel.unacked_restore_throttle)
    assert interval * throttle <= 10
    assert app.conf.task_soft_time_limit < app.conf.task_time_limit


def test_one_queue_per_stage() -> None:
    names = [queue.name for queue in app.conf.task_queues]

    assert names == list(QUEUES)
    assert set(names) == {"ingest", "embed", "write", "query", "reconcile", "fallback"}
    assert app.conf.task_default_queue in names


def test_every_task_is_routed_to_its_stage_queue() -> None:
    routes = app.conf.task_routes

    assert routes == {
        CHUNK_TASK: {"queue": "ingest"},
        EMBED_TASK: {"queue": "embed"},
        WRITE_TASK: {"queue": "write"},
        SYNC_TASK: {"queue": "write"},
        FALLBACK_TASK: {"queue": "fallback"},
        REEMBED_TASK: {"queue": "write"},
        DROP_COLLECTION_TASK: {"queue": "write"},
        SEARCH_TASK: {"queue": "query"},
        RECONCILE_TASK: {"queue": "reconcile"},
        RESTORE_TASK: {"queue": "reconcile"},
    }
    # one queue per stage; only Qdrant's other writers share the write queue (embedded Qdrant
    # has one owner): the sync and a model migration's tasks
    # and the restore shares the reconciler's queue (a whole-store job of the same worker)
    qdrant_writers = {SYNC_TASK, REEMBED_TASK, DROP_COLLECTION_TASK, RESTORE_TASK}
    others = {name: route for name, route in routes.items() if name not in qdrant_writers}
    assert len({route["queue"] for route in others.values()}) == len(others)


def test_messages_are_json_only() -> None:
    assert app.conf.task_serializer == "json"
    assert app.conf.result_serializer == "json"
    assert list(app.conf.accept_content) == ["json"]


def test_broker_and_results_use_the_configured_redis() -> None:
    assert app.conf.broker_url == get_settings().redis_url
    assert app.conf.result_backend == get_settings().redis_url


def test_beat_runs_the_reconciler_on_its_interval() -> None:
    entry = app.conf.beat_schedule["reconcile"]

    assert entry["task"] == RECONCILE_TASK
    assert entry["schedule"] == float(get_settings().reconcile_interval_s)


@pytest.fixture
def fresh_settings(monkeypatch: pytest.MonkeyPatch) -> Any:
    """get_settings() re-read from the variables a test sets, and restored afterwards."""
    for name in list(os.environ):
        if name.upper().startswith("ENGRAM_"):
            monkeypatch.delenv(name)
    get_settings.cache_clear()
    yield monkeypatch
    get_settings.cache_clear()


def test_app_follows_the_settings(fresh_settings: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Given settings with other limits (and no .env of the working folder to read)
    fresh_settings.chdir(tmp_path)
    fresh_settings.setenv("ENGRAM_REDIS_URL", "redis://127.0.0.1:6390/3")
    fresh_settings.setenv("ENGRAM_TASK_SOFT_TIME_LIMIT_S", "100")
    fresh_settings.setenv("ENGRAM_TASK_TIME_LIMIT_S", "200")
    fresh_settings.setenv("ENGRAM_VISIBILITY_TIMEOUT_S", "300")

    # When an app is made
    made = make_app()

    # Then it carries them
    assert made.conf.broker_url == "redis://127.0.0.1:6390/3"
    assert made.conf.broker_transport_options == {
        "visibility_timeout": 300,
        "unacked_restore_throttle": 1,
        **fair_share.broker_options(),
    }
    assert made.conf.result_backend_transport_options == {"visibility_timeout": 300}
    assert (made.conf.task_soft_time_limit, made.conf.task_time_limit) == (100, 200)
    assert isinstance(get_settings(), Settings)


_PROBE = """
import json, sys
connections = []
sys.addaudithook(lambda event, args: connections.append(event) if event in ("socket.connect", "socket.getaddrinfo") else None)
import workers.app
loaded_before = [m for m in workers.app.TASK_MODULES + ["onnxruntime", "neo4j", "qdrant_client"] if m in sys.modules]
app = workers.app.app
seen_by_import = list(connections)
import socket
socket.getaddrinfo("127.0.0.1", 9)  # a control: the hook does see socket calls
control = connections[len(seen_by_import):]
import importlib
for module in workers.app.TASK_MODULES:
    importlib.import_module(module)
registered = sorted(name for name in app.tasks if name.startswith("engram."))
print(json.dumps({
    "connections": seen_by_import, "control": control, "loaded": loaded_before,
    "broker": app.conf.broker_url, "registered": registered,
}))
"""


def test_importing_the_app_connects_to_nothing_and_loads_no_worker_code() -> None:
    # Given a broker address where nothing listens
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("ENGRAM_")}
    env["ENGRAM_REDIS_URL"] = "redis://127.0.0.1:9/0"

    # When workers.app is imported in a fresh interpreter watching every socket call
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )

    # Then it made no connection and loaded none of the task modules or store drivers
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["control"] == ["socket.getaddrinfo"]
    assert report["connections"] == []
    assert report["loaded"] == []
    assert report["broker"] == "redis://127.0.0.1:9/0"
    # and the task modules, once a worker imports them, register exactly the routed task names
    assert report["registered"] == sorted(app.conf.task_routes)


def test_task_modules_are_listed_for_the_workers() -> None:
    assert list(app.conf.include) == TASK_MODULES


# The Redis password: beside the URL, never in it nor in anything Celery prints.

_PASSWORD = "s3cret-celery-password"


def test_the_redis_password_travels_beside_the_url(tmp_path: Path) -> None:
    # Given settings with a Redis password
    settings = Settings(
        _env_file=None, data_dir=tmp_path, redis_url="redis://127.0.0.1:6379/0", redis_password=_PASSWORD
    )

    # When an app is made for them
    made = make_app(settings)

    # Then broker and result backend authenticate with it, and no URL holds it
    connection = made.connection_for_write()
    assert connection.password == _PASSWORD
    assert made.backend.connparams["password"] == _PASSWORD
    for shown in (made.conf.broker_url, made.conf.result_backend, connection.as_uri(), made.backend.as_uri()):
        assert _PASSWORD not in shown
    assert connection.as_uri() == "redis://:**@127.0.0.1:6379/0"  # the banner's form: masked


def test_no_password_means_none_is_sent(tmp_path: Path) -> None:
    made = make_app(Settings(_env_file=None, data_dir=tmp_path))

    assert made.connection_for_write().password is None
    assert made.backend.connparams["password"] is None


def test_a_worker_prints_no_password_at_start_nor_when_it_cannot_connect(tmp_path: Path) -> None:
    # Given a worker whose password comes from the data folder and whose Redis is out of reach
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "redis.password").write_text(_PASSWORD)
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("ENGRAM_")}
    env.update(ENGRAM_DATA_DIR=str(tmp_path), ENGRAM_REDIS_URL="redis://127.0.0.1:9/0")
    # Text logs, for the banner (a worker writing JSON lines prints none)
    env["ENGRAM_LOG_FORMAT"] = "text"
    log = tmp_path / "worker.log"
    celery = str(Path(sys.executable).with_name("celery"))
    command = [celery, "-A", "workers.app", "worker", "-Q", "query", "--pool", "solo", "-n", "t@%h"]

    # When it starts, prints its banner and fails to connect
    with log.open("wb") as out:
        worker = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while b"Cannot connect" not in log.read_bytes() and time.monotonic() < deadline:
            assert worker.poll() is None, log.read_text()
            time.sleep(0.2)
        command_line = Path(f"/proc/{worker.pid}/cmdline").read_bytes()
    finally:
        worker.kill()
        worker.wait()

    # Then the broker shows masked, and the password shows nowhere
    output = log.read_text()
    assert "transport:   redis://:**@127.0.0.1:9/0" in output
    assert "Cannot connect to redis://:**@127.0.0.1:9/0" in output
    assert _PASSWORD not in output
    assert _PASSWORD.encode() not in command_line
