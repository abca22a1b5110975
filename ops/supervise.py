"""The long-running processes of a local Engram, owned by supervisord. ops/lib/common.sh calls this:

    .venv/bin/python ops/supervise.py config     # supervisord.conf for this data dir, on stdout
    .venv/bin/python ops/supervise.py wait       # until every program runs and answers
    .venv/bin/python ops/supervise.py leftovers  # what ops/ started for this data dir and still runs
    .venv/bin/python ops/supervise.py leftovers --programs  # only workers, beat, app: any is an orphan
    .venv/bin/python ops/supervise.py wipe-metrics  # before a fresh start (shared/metrics.py)

A worker host (ops/worker-host) gives ``config`` and ``wait`` ``--host NAME`` and, to take only
some queues, ``--queues ingest,embed``: its supervisor runs workers alone, named ``queue@NAME``
(beat, the app and Flower run once, on the main host), and needs a Qdrant server
(ENGRAM_QDRANT_URL): an embedded folder opens in one process of one machine only.

supervisord runs the programs directly (no shell in between), restarts one that dies, and stops
each with its process group. Its socket, pid file and logs are in the data dir, so the demo
(.engram) and the tests (.engram-test) each have their own and never meet.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import socket
import sys
import time
import xmlrpc.client
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from shared import logging_setup
from shared.settings import Settings, get_settings

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"
# Start order; supervisord stops in the reverse: Flower and the app, then beat, then the workers.
WORKERS_PRIORITY, BEAT_PRIORITY, API_PRIORITY, FLOWER_PRIORITY = 100, 200, 300, 300


@dataclass(frozen=True)
class Worker:
    name: str
    queues: tuple[str, ...]
    concurrency: int
    pool: str = "prefork"
    host: str | None = None  # a worker host's name (ops/worker-host); None: this machine's

    @property
    def node_arg(self) -> str:
        """The -n value: Celery makes %h this machine's host name."""
        return f"{self.name}@{self.host or '%h'}"

    @property
    def node(self) -> str:
        return f"{self.name}@{self.host or socket.gethostname()}"


@dataclass(frozen=True)
class Role:
    """What one supervisor runs: the main host's whole stack (host None), or a worker host's
    workers alone, on all queues (queues None) or some."""

    host: str | None = None
    queues: frozenset[str] | None = None


MAIN = Role()


def worker_specs(settings: Settings, role: Role = MAIN) -> list[Worker]:
    """One worker process per queue; an embedded Qdrant folder opens in one process only, so then
    the write, reconcile and fallback queues share one worker (and no second host may run)."""
    if role.host is not None and settings.qdrant_url is None:
        raise SystemExit(
            "a worker host needs a Qdrant server (ENGRAM_QDRANT_URL and ENGRAM_QDRANT_API_KEY): the "
            "embedded backup's folder opens in one process of one machine only"
        )
    workers = [Worker("ingest", ("ingest",), 1), Worker("embed", ("embed",), 1)]
    if settings.qdrant_url is None:
        # Also the fallback searches of the folder; threads, so one is answered during a write.
        workers.append(Worker("write", ("write", "reconcile", "fallback"), 3, pool="threads"))
    else:
        workers += [Worker("write", ("write",), 1), Worker("reconcile", ("reconcile",), 1)]
    workers.append(Worker("query", ("query",), 2))
    if role.queues is not None:
        known = {queue for worker in workers for queue in worker.queues}
        if unknown := sorted(role.queues - known):
            raise SystemExit(f"no such queue: {', '.join(unknown)} (queues: {', '.join(sorted(known))})")
        workers = [w for w in workers if role.queues.intersection(w.queues)]
    return [Worker(w.name, w.queues, w.concurrency, w.pool, role.host) for w in workers]


@dataclass(frozen=True)
class Paths:
    data: Path

    @property
    def run(self) -> Path:
        return self.data / "run"

    @property
    def logs(self) -> Path:
        return self.data / "logs"

    @property
    def socket(self) -> Path:
        return self.run / "supervisor.sock"


def fingerprint(settings: Settings) -> str:
    """Changes when any setting does (secrets included, never written out), so a supervisor
    started with other settings is restarted rather than reused."""
    values = {
        name: value.get_secret_value() if hasattr(value, "get_secret_value") else value
        for name, value in settings
    }
    return hashlib.sha256(repr(sorted(values.items(), key=str)).encode()).hexdigest()[:16]


def _value(value: str | Path) -> str:
    # supervisord expands %(name)s in values, so a literal % is doubled.
    return str(value).replace("%", "%%")


def _quote(*words: str | Path) -> str:
    """A command= value: supervisord splits it like a shell."""
    return _value(" ".join(shlex.quote(str(word)) for word in words))


def _program(name: str, command: str, paths: Paths, priority: int, stopwaitsecs: int, **extra: str) -> str:
    lines = [
        f"[program:{name}]",
        f"command={command}",
        f"directory={_value(ROOT)}",
        f"priority={priority}",
        "autostart=true",
        "autorestart=true",
        "startsecs=3",
        "startretries=5",
        "stopsignal=TERM",
        f"stopwaitsecs={stopwaitsecs}",
        "stopasgroup=true",
        "killasgroup=true",
        "redirect_stderr=true",
        f"stdout_logfile={_value(paths.logs / (name + '.log'))}",
        "stdout_logfile_maxbytes=50MB",
        "stdout_logfile_backups=3",
        *(f"{key}={value}" for key, value in extra.items()),
    ]
    return "\n".join(lines)


def config(settings: Settings, role: Role = MAIN) -> str:
    """The main host's supervisor: workers, beat, the app and Flower. A worker host's: its
    workers alone (beat must run once, and the app and Flower stay with the main host)."""
    paths = Paths(settings.data_dir.absolute())
    if len(str(paths.socket).encode()) > 100:
        raise SystemExit(f"{paths.socket}: too long for a unix socket; use a shorter ENGRAM_DATA_DIR")
    celery = VENV / "bin" / "celery"
    # A stopping worker gets the soft-shutdown window to finish or re-queue its task, then some
    # seconds to exit, before the group is killed.
    worker_stop = int(settings.worker_soft_shutdown_timeout_s) + 20
    sections = [
        f"; Written by ops/supervise.py for {paths.data}: edits are lost at the next start.\n"
        f"; settings fingerprint {fingerprint(settings)}",
        f"[unix_http_server]\nfile={_value(paths.socket)}\nchmod=0700",
        "[supervisord]\n"
        f"logfile={_value(paths.logs / 'supervisord.log')}\n"
        f"pidfile={_value(paths.run / 'supervisord.pid')}\n"
        f"childlogdir={_value(paths.logs)}\n"
        f"directory={_value(ROOT)}\n"
        # Private to this user: logs, the embedded Qdrant folder and every file a program writes.
        "umask=077\n"
        f"identifier=engram{'-' + role.host if role.host else ''}",
        "[rpcinterface:supervisor]\n"
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface",
        f"[supervisorctl]\nserverurl=unix://{_value(paths.socket)}",
    ]
    workers = worker_specs(settings, role)
    for worker in workers:
        command = _quote(celery, "-A", "workers.app", "worker", "-Q", ",".join(worker.queues))
        command += " " + _quote("-n", worker.node_arg, "--pool", worker.pool)
        command += " " + _quote("--concurrency", str(worker.concurrency), "--loglevel", "INFO")
        # SIGTERM as Celery's cold shutdown: the running task gets the soft-shutdown window, then
        # is re-queued (a warm shutdown would wait for it without limit). Pool children ignore it.
        sections.append(
            _program(
                f"worker-{worker.name}",
                command,
                paths,
                WORKERS_PRIORITY,
                worker_stop,
                environment='REMAP_SIGTERM="SIGQUIT"',
            )
        )
    # One group: supervisord stops a group's programs at once, and stops groups one by one.
    programs = ",".join(f"worker-{w.name}" for w in workers)
    sections.append(f"[group:workers]\nprograms={programs}\npriority={WORKERS_PRIORITY}")
    if role.host is not None:
        return "\n\n".join(sections) + "\n"
    # Beat prints a banner before its logging starts: not a JSON line, so not with JSON logs.
    quiet = ("--quiet",) if logging_setup.resolved_format(settings, service=True) == "json" else ()
    beat = _quote(celery, *quiet, "-A", "workers.app", "beat", "--loglevel", "INFO")
    beat += " " + _quote("--schedule", paths.run / "beat-schedule")
    sections.append(_program("beat", beat, paths, BEAT_PRIORITY, 10))
    sections.append(_program("api", _quote(VENV / "bin" / "engram", "serve"), paths, API_PRIORITY, 10))
    # Flower on 127.0.0.1, behind basic auth (ops/flower.py): the workers, tasks and queues.
    flower = _quote(VENV / "bin" / "python", "-m", "workers.flower")
    sections.append(_program("flower", flower, paths, FLOWER_PRIORITY, 10))
    return "\n\n".join(sections) + "\n"


# Waiting for readiness.


def _supervisor(paths: Paths) -> Any:
    from supervisor.xmlrpc import SupervisorTransport

    transport = SupervisorTransport(None, None, serverurl=f"unix://{paths.socket}")
    return xmlrpc.client.ServerProxy("http://127.0.0.1", transport=transport)


def _log_tail(path: str, lines: int = 15) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _answering_workers(nodes: list[str]) -> dict[str, set[int]]:
    """Which worker processes answer as each node name, by pid (a leftover would show as a second one)."""
    from workers.app import app

    replies = app.control.broadcast("stats", destination=nodes, reply=True, timeout=1.0, limit=len(nodes))
    answering: dict[str, set[int]] = {}
    for reply in replies or []:
        for node, stats in reply.items():
            answering.setdefault(node, set()).add(int(stats.get("pid", 0)))
    return answering


def wait(settings: Settings, timeout_s: float, role: Role = MAIN) -> int:
    """Until supervisord runs every program, each worker answers Celery as the process supervisord
    started (not some earlier one), and the app's /healthz answers (a worker host has no app).
    Fails fast on a program that supervisord gave up on."""
    paths = Paths(settings.data_dir.absolute())
    workers = {f"worker-{w.name}": w for w in worker_specs(settings, role)}
    host = "127.0.0.1" if settings.api_host in ("0.0.0.0", "") else settings.api_host
    health_url = f"http://{host}:{settings.api_port}/healthz"
    deadline = time.monotonic() + timeout_s
    waiting: list[str] = ["supervisord"]
    warned: set[int] = set()
    while time.monotonic() < deadline:
        try:
            infos = {info["name"]: info for info in _supervisor(paths).supervisor.getAllProcessInfo()}
        except (OSError, xmlrpc.client.Error):
            time.sleep(0.5)  # supervisord still coming up
            continue
        fatal = [info for info in infos.values() if info["statename"] == "FATAL"]
        for info in fatal:
            print(f"{info['name']} would not start ({info['spawnerr'] or 'exited at once'}); its log:")
            print(_log_tail(info["stdout_logfile"]))
        if fatal:
            return 1
        waiting = [name for name, info in sorted(infos.items()) if info["statename"] != "RUNNING"]
        answering = _answering_workers([w.node for w in workers.values()])
        for name, worker in workers.items():
            pid = infos.get(name, {}).get("pid")
            others = answering.get(worker.node, set()) - {pid} - warned
            if others:
                print(f"warning: {worker.node} also answers from pid {sorted(others)}, not started here")
                warned |= others
            if pid not in answering.get(worker.node, set()) and name not in waiting:
                waiting.append(name)
        if role.host is None and "api" not in waiting and not _answers(health_url):
            waiting.append("api")
        if not waiting:
            ready = ", ".join(f"{name} (pid {infos[name]['pid']})" for name in sorted(infos))
            app = health_url.removesuffix("/healthz")
            where = f"worker host {role.host}" if role.host else f"the app on {app}"
            print(f"ready: {ready}; {where}")
            return 0
        time.sleep(1)
    print(f"not ready after {timeout_s:g} s: {', '.join(waiting)}; logs in {paths.logs}")
    return 1


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=3.0).status_code == 200
    except httpx.HTTPError:
        return False


# What is left after a stop.


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _absolute(process: Path, arg: str) -> str:
    """An argument as an absolute path, read from the process's own working directory."""
    if arg.startswith("/"):
        return arg
    try:
        return os.path.normpath(Path(os.readlink(process / "cwd")) / arg)
    except OSError:
        return arg


def _environ(process: Path) -> dict[str, str]:
    items = _read(process / "environ").split(b"\0")
    return dict(item.decode(errors="replace").partition("=")[::2] for item in items if b"=" in item)


def _started_here(process: Path, args: list[str], data_dir: Path, programs_only: bool) -> bool:
    """Whether ops/ started this process for this data dir (programs_only: one supervisord runs)."""
    launched = [_absolute(process, arg) for arg in args[:2]]
    if any(path.startswith(f"{VENV}/") for path in launched):
        if programs_only and not (
            f"{VENV}/bin/celery" in launched
            or (f"{VENV}/bin/engram" in launched and "serve" in args)
            or (f"{VENV}/bin/python" in launched and "workers.flower" in args)
        ):
            return False
        return Path(_environ(process).get("ENGRAM_DATA_DIR", "/nonexistent")).absolute() == data_dir
    if programs_only:
        return False
    if "engram.Neo4jServer" in args:
        return str(data_dir / "neo4j") in args
    if "redis-server" in args[0]:  # Redis works in its --dir
        try:
            return Path(os.readlink(process / "cwd")) == data_dir / "redis"
        except OSError:
            return False
    return False


def leftovers(data_dir: Path, programs_only: bool = False) -> list[tuple[int, str]]:
    """Processes ops/ started for this data dir that still run: anything from this checkout's .venv
    whose ENGRAM_DATA_DIR is this one, and the Redis and Neo4j launcher of this data dir."""
    found: list[tuple[int, str]] = []
    for process in Path("/proc").iterdir():
        if not process.name.isdigit() or int(process.name) == os.getpid():
            continue
        args = [arg.decode(errors="replace") for arg in _read(process / "cmdline").split(b"\0") if arg]
        if not args or _read(process / "stat").split(b") ")[-1][:1] == b"Z":  # gone, or a zombie
            continue
        if _started_here(process, args, data_dir.absolute(), programs_only):
            found.append((int(process.name), " ".join(args)[:200]))
    return sorted(found)


def _role(host: str | None, queues: str | None) -> Role:
    if host is None:
        if queues:
            raise SystemExit("--queues is for a worker host (--host NAME)")
        return MAIN
    if not host.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise SystemExit(f"--host {host!r}: letters, digits, '-', '_' and '.' only (a Celery node name)")
    chosen = frozenset(q.strip() for q in queues.split(",") if q.strip()) if queues else None
    return Role(host, chosen)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    configuring = commands.add_parser("config", help="print supervisord.conf for this data dir")
    waiting = commands.add_parser("wait", help="wait until every program runs and answers")
    waiting.add_argument("--timeout", type=float, default=180.0)
    for sub in (configuring, waiting):
        sub.add_argument("--host", help="a worker host's name: its workers alone, named queue@HOST")
        sub.add_argument("--queues", help="a worker host's queues, comma-separated (default: all)")
    commands.add_parser("wipe-metrics", help="remove every process's metric files (a fresh start)")
    left = commands.add_parser("leftovers", help="list what ops/ started here and still runs; exit 1 if any")
    left.add_argument("--programs", action="store_true", help="only what supervisord would run")
    args = parser.parse_args(argv)

    settings = get_settings()
    if args.command in ("config", "wait"):
        role = _role(args.host, args.queues)
        if args.command == "wait":
            return wait(settings, args.timeout, role)
        sys.stdout.write(config(settings, role))
        return 0
    if args.command == "wipe-metrics":
        from shared import metrics

        metrics.wipe(settings)
        return 0
    found = leftovers(settings.data_dir, programs_only=args.programs)
    if found:
        print(f"still running for {settings.data_dir.absolute()}:")
        for pid, command in found:
            print(f"  {pid:>7}  {command}")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
