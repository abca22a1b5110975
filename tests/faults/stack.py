"""An isolated stack for the fault suite: its own Redis, Neo4j, data folder and Celery workers.

Redis and Neo4j are started and stopped through ops/lib (the same functions ops/ uses), on ports of
their own, so a scenario can restart them without touching anybody else's services. The workers
are celery processes started here, one per queue as ops/ runs them, so a scenario knows each main
pid, can find its pool children in /proc, and can SIGKILL either.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import neo4j
import redis

from shared import redis_client, secrets
from shared.settings import Settings
from shared.stores.base import SearchableVectorStore
from shared.stores.folders import embedded_folder
from shared.stores.qdrant_payload import collection_name
from shared.stores.vectors import connect_vectors
from workers.app import QUEUES

ROOT = Path(__file__).resolve().parents[2]
CELERY = str(Path(sys.executable).with_name("celery"))
DEFAULT_PORTS = "6581 7881"  # redis, neo4j; ENGRAM_FAULTS_PORTS moves them
# ops/lib's neo4j_start waits ENGRAM_NEO4J_START_TIMEOUT (120 s) for Neo4j; the stack waits for
# ops/lib a minute longer, so a slow start fails with ops/lib's own message, not a bare timeout.
NEO4J_START_S = int(os.environ.get("ENGRAM_NEO4J_START_TIMEOUT", "120")) + 60


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    queues: str
    concurrency: int = 1
    pool: str = "prefork"


# As ops/supervise.py runs them with embedded Qdrant: write, reconcile and fallback share the one
# process that may open the Qdrant folder, in a thread pool.
WORKERS: dict[str, WorkerSpec] = {
    "ingest": WorkerSpec("ingest"),
    "embed": WorkerSpec("embed"),
    "write": WorkerSpec("write,reconcile,fallback", 3, "threads"),
    "query": WorkerSpec("query"),
}


def wait_for(predicate: Callable[[], bool], timeout_s: float, interval_s: float = 0.1) -> bool:
    """Polls until the predicate holds or the bound passes; never raises on the predicate's errors."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if predicate():
                return True
        except Exception:  # a service down mid-scenario is what the scenario is about
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)


def children_of(pid: int) -> list[int]:
    """Pids whose parent is ``pid``: a Celery main process's pool children."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name is in parentheses and may hold spaces: the ppid is after the last ')'.
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


class Worker:
    """One celery worker process and its log."""

    def __init__(self, name: str, spec: WorkerSpec, env: Mapping[str, str], log: Path) -> None:
        self.name = name
        self.spec = spec
        self._log = log
        command = [CELERY, "-A", "workers.app", "worker", "-Q", spec.queues]
        command += ["-n", f"{name}-{uuid.uuid4().hex[:6]}@%h", "--pool", spec.pool]
        command += ["--concurrency", str(spec.concurrency), "--loglevel", "INFO"]
        with log.open("ab") as out:
            out.write(f"\n=== start {time.strftime('%H:%M:%S')}\n".encode())
            offset = out.tell()
            self.process = subprocess.Popen(
                command, cwd=ROOT, env=dict(env), stdout=out, stderr=subprocess.STDOUT
            )
        self._offset = offset

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        with self._log.open("rb") as log:
            log.seek(self._offset)
            return log.read().decode(errors="replace")

    def received(self, task: str) -> int:
        """How many tasks of this name this process has taken so far."""
        return sum(1 for line in self.output().splitlines() if f"Task {task}[" in line and "received" in line)

    def wait_ready(self, timeout_s: float = 120) -> None:
        if not wait_for(
            lambda: " ready." in self.output() or self.process.poll() is not None, timeout_s, 0.2
        ):
            raise RuntimeError(f"worker {self.name} not ready in {timeout_s:g} s:\n{self.output()[-3000:]}")
        if self.process.poll() is not None:
            raise RuntimeError(f"worker {self.name} exited at start:\n{self.output()[-3000:]}")

    def kill(self, main: bool = True, children: bool = True) -> list[int]:
        """SIGKILL, as the OOM killer or a lost machine would; returns the pids killed."""
        targets = children_of(self.pid) if children else []
        if main:
            targets.append(self.pid)
        _kill(targets)
        if main:
            self.process.wait()
        return targets

    def stop(self, warm: bool = False, timeout_s: float = 60) -> None:
        """SIGTERM as ops/ stops workers (running work gets the soft-shutdown window, then is
        re-queued; an idle worker too waits that window out), or with ``warm`` SIGINT: a warm
        shutdown that is immediate when idle. SIGKILL after the bound."""
        pool = children_of(self.pid)
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT if warm else signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        if not wait_for(lambda: not any(_alive(pid) for pid in pool), 10, 0.1):
            _kill(pool)


# On a Qdrant server the stack's collections are its own, beside those of whoever else uses it.
SERVER_PREFIX = "faults"


@dataclass(frozen=True, slots=True)
class QdrantServerAddress:
    """A Qdrant server the stack's backup lives on; without one the backup is embedded. Under
    ./ops/test, ENGRAM_QDRANT_URL and ENGRAM_QDRANT_API_KEY name only the server ops/test started
    (its server pass): it clears the caller's."""

    url: str
    api_key: str

    @classmethod
    def from_env(cls) -> QdrantServerAddress | None:
        url = os.environ.get("ENGRAM_QDRANT_URL")
        return None if not url else cls(url, os.environ.get("ENGRAM_QDRANT_API_KEY", ""))


class FaultStack:
    """Redis, Neo4j and workers in a data folder of their own; torn down by :meth:`close`."""

    def __init__(
        self, data_dir: Path, redis_port: int, neo4j_port: int, qdrant: QdrantServerAddress | None = None
    ) -> None:
        self.data_dir = data_dir.resolve()
        self.redis_port = redis_port
        self.neo4j_port = neo4j_port
        self.qdrant = qdrant
        self.settings = self._settings()
        self.logs = self.data_dir / "logs"
        self.workers: dict[str, Worker] = {}
        self._redis: redis.Redis | None = None
        self._neo4j: neo4j.Driver | None = None

    @classmethod
    def from_env(cls, data_dir: Path | None = None, qdrant: QdrantServerAddress | None = None) -> FaultStack:
        redis_port, neo4j_port = (
            int(p) for p in os.environ.get("ENGRAM_FAULTS_PORTS", DEFAULT_PORTS).split()
        )
        folder = data_dir or Path(os.environ.get("ENGRAM_FAULTS_DATA_DIR", str(ROOT / ".engram-faults")))
        return cls(folder, redis_port, neo4j_port, qdrant)

    def _settings(self) -> Settings:
        """The stack's settings; its Redis password is the one in its own data folder (read again
        once :meth:`open` has made it), never the caller's ENGRAM_REDIS_PASSWORD."""
        settings = Settings(
            data_dir=self.data_dir,
            redis_url=f"redis://127.0.0.1:{self.redis_port}/0",
            redis_password=None,
            neo4j_uri=f"bolt://127.0.0.1:{self.neo4j_port}",
            qdrant_url=None if self.qdrant is None else self.qdrant.url,
            qdrant_api_key=None if self.qdrant is None else self.qdrant.api_key,
            qdrant_path=None,
        )
        if self.qdrant is None:
            return settings
        return settings.model_copy(update={"qdrant_collection_prefix": SERVER_PREFIX})

    # Environment of every process of the stack: the ENGRAM_* of this stack over the caller's.

    def env(self, **extra: str) -> dict[str, str]:
        own = ("ENGRAM_QDRANT_URL", "ENGRAM_QDRANT_PATH", "ENGRAM_REDIS_PASSWORD", "REDISCLI_AUTH")
        env = {k: v for k, v in os.environ.items() if k not in own}
        env.update(
            ENGRAM_ROOT=str(ROOT),
            ENGRAM_DATA_DIR=str(self.data_dir),
            ENGRAM_REDIS_URL=self.settings.redis_url,
            ENGRAM_NEO4J_URI=self.settings.neo4j_uri,
            # As ops/ runs workers: SIGTERM is a cold shutdown after the soft-shutdown window.
            REMAP_SIGTERM="SIGQUIT",
        )
        if self.qdrant is not None:
            env.update(
                ENGRAM_QDRANT_URL=self.qdrant.url,
                ENGRAM_QDRANT_API_KEY=self.qdrant.api_key,
                ENGRAM_QDRANT_COLLECTION_PREFIX=SERVER_PREFIX,
            )
        env.update(extra)
        return env

    def _ops(self, function: str, timeout_s: float = 180) -> None:
        script = f"source ops/lib/neo4j.sh && source ops/lib/common.sh && {function}"
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=ROOT,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{function} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")

    # Lifecycle.

    def open(self) -> None:
        """Starts from an empty data folder (stopping what a previous run may have left there) and,
        on a Qdrant server, without the collection another stack left there: stacks share the
        server's prefix, and a collection stamped with an earlier Neo4j's store id would make the
        first reconcile of this one report ``primary_lost``."""
        if self.data_dir.exists():
            self.unfreeze_qdrant()
            for stop in ("neo4j_stop", "redis_stop"):
                self._ops(stop)
            shutil.rmtree(self.data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / ".gitignore").write_text("*\n")
        self.logs.mkdir(exist_ok=True)
        # A new Redis password for the new folder, as ops/ makes one; the stack's clients use it.
        secrets.ensure(self.settings.redis_password_file)
        self.settings = self._settings()
        self.redis_start()
        self.neo4j_start()
        if self.qdrant is not None:
            self._drop_collection()
        for name in WORKERS:
            self.start_worker(name)

    def _drop_collection(self) -> None:
        connection = connect_vectors(self.settings)
        try:
            connection.drop(self.model, self.dimension)
        finally:
            connection.close()

    def close(self) -> None:
        """Stops everything this stack started, even half-started; never raises."""
        self.unfreeze_qdrant()
        for name in list(self.workers):
            try:
                self.stop_worker(name)
            except Exception as exc:  # keep tearing down
                print(f"faults: stopping worker {name}: {exc}", file=sys.stderr)
        for client in (self._redis, self._neo4j):
            if client is not None:
                client.close()
        self._redis = self._neo4j = None
        for stop in ("neo4j_stop", "redis_stop"):
            try:
                self._ops(stop)
            except Exception as exc:
                print(f"faults: {stop}: {exc}", file=sys.stderr)

    # Services.

    def redis_start(self) -> None:
        self._ops("redis_start")

    def redis_shutdown(self) -> None:
        """``redis-cli shutdown``: Redis writes its AOF and exits."""
        self._ops("redis_stop")
        wait_for(lambda: not self._redis_up(), 30)

    def redis_kill9(self) -> None:
        pid = int((self.data_dir / "run" / "redis.pid").read_text().split()[0])
        _kill([pid])
        wait_for(lambda: not _alive(pid), 10)

    def _redis_up(self) -> bool:
        try:
            return bool(self.redis.ping())
        except redis.RedisError:
            return False

    def neo4j_start(self) -> None:
        self._ops("neo4j_start", timeout_s=NEO4J_START_S)

    def neo4j_stop(self) -> None:
        self._ops("neo4j_stop", timeout_s=120)

    @property
    def redis(self) -> redis.Redis:
        if self._redis is None:
            self._redis = redis_client.connect(self.settings)
        return self._redis

    @property
    def neo4j(self) -> neo4j.Driver:
        if self._neo4j is None:
            s = self.settings
            self._neo4j = neo4j.GraphDatabase.driver(
                s.neo4j_uri,
                auth=(s.neo4j_user, s.neo4j_password.get_secret_value()),
                connection_timeout=5.0,
                max_transaction_retry_time=5.0,
                notifications_min_severity="OFF",
            )
        return self._neo4j

    def keys(self) -> int:
        return int(cast(int, self.redis.dbsize()))

    def broker_backlog(self) -> int:
        """Messages queued or delivered-but-unacknowledged (retries waiting for their eta too)."""
        pipe = self.redis.pipeline(transaction=False)
        for queue in QUEUES:
            pipe.llen(queue)
        pipe.hlen("unacked")
        return sum(int(n) for n in pipe.execute())

    # Workers.

    def start_worker(
        self, name: str, concurrency: int | None = None, env: Mapping[str, str] | None = None
    ) -> Worker:
        """A worker of its usual queues; ``env`` changes its settings (say, an unreachable Qdrant)."""
        spec = WORKERS[name]
        if concurrency is not None:
            spec = WorkerSpec(spec.queues, concurrency, spec.pool)
        worker = Worker(name, spec, self.env(**(env or {})), self.logs / f"worker-{name}.log")
        self.workers[name] = worker
        worker.wait_ready()
        return worker

    def stop_worker(self, name: str, warm: bool = False) -> None:
        worker = self.workers.pop(name, None)
        if worker is not None:
            worker.stop(warm)

    def restart_worker(
        self, name: str, concurrency: int | None = None, env: Mapping[str, str] | None = None
    ) -> Worker:
        self.stop_worker(name)
        return self.start_worker(name, concurrency, env)

    def worker(self, name: str) -> Worker:
        return self.workers[name]

    def revive(self) -> list[str]:
        """Restarts each worker whose process has exited, as supervisord (ops) or a container's
        restart policy (compose) does; returns their names. A worker can exit on its own when
        Redis goes away mid-task: kombu's restore of the unacknowledged message on a released
        connection raises, and Celery stops ("Unrecoverable error"). The message stays in Redis's
        unacknowledged set and is redelivered after the visibility timeout."""
        dead = [name for name, worker in self.workers.items() if worker.process.poll() is not None]
        for name in dead:
            spec = self.workers[name].spec
            self.stop_worker(name)
            self.start_worker(name, spec.concurrency)
        return dead

    def ensure_workers(self) -> None:
        """Every worker running, with its usual settings."""
        for name, spec in WORKERS.items():
            worker = self.workers.get(name)
            if worker is None or worker.process.poll() is not None or worker.spec != spec:
                self.restart_worker(name)

    # Data.

    @property
    def collection(self) -> str:
        return collection_name(self.settings.qdrant_collection_prefix, self.model, self.dimension)

    model, dimension = "all-MiniLM-L6-v2", 384

    @property
    def edge(self) -> bool:
        """The embedded engine is Qdrant Edge (``ENGRAM_QDRANT_ENGINE=edge``), not local mode."""
        return self.settings.qdrant_engine == "edge"

    @property
    def qdrant_folder(self) -> Path:
        """The embedded backup's folder, of the engine the settings name."""
        return embedded_folder(self.settings)

    @property
    def collection_dir(self) -> Path:
        """The collection's own folder: local mode's ``collection/<name>/`` (its SQLite file),
        Edge's shard ``<name>/`` (its WAL, segments and ``engram.json``)."""
        if self.edge:
            return self.qdrant_folder / self.collection
        return self.qdrant_folder / "collection" / self.collection

    @contextlib.contextmanager
    def backup(self) -> Iterator[SearchableVectorStore | None]:
        """The collection, through the adapter of the configured engine; None when there is none
        yet (reading it must not make it). Embedded: only while the write worker (its owner) is
        stopped; a server is read while the workers write."""
        connection = connect_vectors(self.settings)
        try:
            if self.dimension not in connection.dimensions_of(self.model):
                yield None
            else:
                yield connection.store(self.model, self.dimension)
        finally:
            connection.close()

    def freeze_qdrant(self) -> None:
        """Makes the collection's storage immutable. Local mode: the collection folder, where its
        SQLite can then write no journal. Edge: every file and folder of the shard (its WAL
        appends to files already there, which an immutable folder alone would not stop). The
        folder is made by the first sync, a moment after the first Neo4j commit: wait for it."""
        if not wait_for(self.collection_dir.exists, 60, 0.05):
            raise RuntimeError(f"no Qdrant collection folder {self.collection_dir} after 60 s")
        recursive = ["-R"] if self.edge else []
        subprocess.run(["chattr", *recursive, "+i", str(self.collection_dir)], check=True)

    def unfreeze_qdrant(self) -> None:
        if self.collection_dir.exists():
            recursive = ["-R"] if self.edge else []
            subprocess.run(["chattr", *recursive, "-i", str(self.collection_dir)], check=False)

    def reset(self) -> None:
        """Clean data for the next scenario: no work in flight, empty stores, usual workers.

        Work a scenario left in flight (queued, unacknowledged, waiting for a retry) is dropped with
        the workers that hold it, so it cannot land in the next scenario.
        """
        self.unfreeze_qdrant()
        if not self._redis_up():
            self.redis_start()
        self._ops("neo4j_start", timeout_s=NEO4J_START_S)
        if self.broker_backlog():
            for name in list(self.workers):
                self.stop_worker(name)
            self.redis.delete(*QUEUES, "unacked", "unacked_index", "unacked_mutex")
        self.stop_worker("write", warm=True)
        self.neo4j.execute_query(
            "MATCH (n) WHERE n:Memory OR n:Document OR n:DeletedMemory OR n:DeletedDocument DETACH DELETE n"
        )
        self._drop_collection()
        self.ensure_workers()
