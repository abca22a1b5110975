"""ops/supervise.py's supervisor config for a worker host (ops/worker-host): workers alone, named
after the host, on the queues chosen, and never without a Qdrant server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _config(
    tmp_path: Path, *args: str, qdrant_url: str | None = "http://10.0.0.5:6333"
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env["ENGRAM_DATA_DIR"] = str(tmp_path / "hosts" / "b")
    if qdrant_url:
        env["ENGRAM_QDRANT_URL"] = qdrant_url
    return subprocess.run(
        [sys.executable, "ops/supervise.py", "config", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def _programs(config: str) -> list[str]:
    return [line[len("[program:") : -1] for line in config.splitlines() if line.startswith("[program:")]


def test_a_worker_host_runs_workers_alone_named_after_it_in_its_own_folders(tmp_path: Path) -> None:
    done = _config(tmp_path, "--host", "b")

    assert done.returncode == 0, done.stderr
    assert _programs(done.stdout) == [
        "worker-ingest",
        "worker-embed",
        "worker-write",
        "worker-reconcile",
        "worker-query",
    ]
    for queue in ("ingest", "embed", "write", "reconcile", "query"):
        assert f"-Q {queue} -n {queue}@b " in done.stdout
    assert "identifier=engram-b" in done.stdout
    assert f"pidfile={tmp_path}/hosts/b/run/supervisord.pid" in done.stdout
    assert f"stdout_logfile={tmp_path}/hosts/b/logs/worker-ingest.log" in done.stdout


def test_the_main_host_keeps_beat_the_app_and_flower(tmp_path: Path) -> None:
    done = _config(tmp_path)

    assert done.returncode == 0, done.stderr
    assert {"beat", "api", "flower", "worker-query"} <= set(_programs(done.stdout))
    assert "-n query@%%h " in done.stdout  # supervisord's %%, Celery's %h: this machine


def test_a_worker_host_takes_the_queues_chosen(tmp_path: Path) -> None:
    done = _config(tmp_path, "--host", "b", "--queues", "ingest,write")

    assert done.returncode == 0, done.stderr
    assert _programs(done.stdout) == ["worker-ingest", "worker-write"]


def test_an_unknown_queue_is_refused_naming_the_queues(tmp_path: Path) -> None:
    done = _config(tmp_path, "--host", "b", "--queues", "ingest,fallback")

    assert done.returncode != 0
    assert "no such queue: fallback" in done.stderr
    assert "query, reconcile, write" in done.stderr


def test_a_worker_host_without_a_qdrant_server_is_refused(tmp_path: Path) -> None:
    done = _config(tmp_path, "--host", "b", qdrant_url=None)

    assert done.returncode != 0
    assert "needs a Qdrant server (ENGRAM_QDRANT_URL" in done.stderr
    assert "[program:" not in done.stdout


def test_the_script_refuses_without_a_qdrant_server_before_starting_anything(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env["ENGRAM_DATA_DIR"] = str(tmp_path)

    done = subprocess.run(
        [str(ROOT / "ops" / "worker-host"), "start", "b"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )

    assert done.returncode == 1
    assert "a worker host needs a Qdrant server: set ENGRAM_QDRANT_URL" in done.stderr
    assert not (tmp_path / "hosts" / "b" / "run").exists()
