"""Keeps one service running: Redis or Neo4j as ops/ starts them (ops/lib/*.sh).

    .venv/bin/python ops/keep.py --name redis --child-pidfile run/redis.pid [--stdin] -- redis-server ...

It runs the command in the foreground and, when it dies by itself (a ``kill -9``, an out-of-memory
kill), starts it again a second later, so a dead Redis or Neo4j is back without anyone running
./ops/demo; it gives up after five deaths in a row each within ``--min-uptime`` seconds of its
start (a service that cannot start, which its log explains). SIGTERM stops the service (SIGTERM,
then SIGKILL after ``--stop-timeout``) and then the keeper: ops/lib's stop functions send it.
``--stdin`` reads the keeper's stdin once and gives it to each start (Redis's config, password
included, never on a command line). Standard library only; the ops scripts run it from the venv.
supervisord would do as well, but ops/test and ops/demo start Redis and Neo4j long before it,
one at a time, and wait for each.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

GIVE_UP_AFTER = 5


def _say(name: str, text: str) -> None:
    print(f"keep[{name}] {time.strftime('%Y-%m-%dT%H:%M:%S')}: {text}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--name", required=True)
    parser.add_argument("--child-pidfile", type=Path, help="where the service's pid is written")
    parser.add_argument("--stdin", action="store_true", help="give each start this process's stdin")
    parser.add_argument("--min-uptime", type=float, default=10.0)
    parser.add_argument("--stop-timeout", type=float, default=120.0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")
    given = sys.stdin.buffer.read() if args.stdin else None
    stopping = False
    child: subprocess.Popen[bytes] | None = None

    def stop(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            child.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    quick_deaths = 0
    while not stopping:
        started = time.monotonic()
        child = subprocess.Popen(command, stdin=subprocess.PIPE if given is not None else subprocess.DEVNULL)
        if args.child_pidfile is not None:
            args.child_pidfile.write_text(f"{child.pid}\n")
        if given is not None and child.stdin is not None:
            child.stdin.write(given)
            child.stdin.close()
        while True:
            try:
                code = child.wait(timeout=args.stop_timeout if stopping else None)
                break
            except subprocess.TimeoutExpired:
                _say(args.name, f"pid {child.pid} still alive {args.stop_timeout:g} s after SIGTERM: SIGKILL")
                child.kill()
        if stopping:
            break
        quick_deaths = quick_deaths + 1 if time.monotonic() - started < args.min_uptime else 0
        if quick_deaths >= GIVE_UP_AFTER:
            _say(args.name, f"exited {quick_deaths} times in a row within {args.min_uptime:g} s: giving up")
            return 1
        _say(args.name, f"pid {child.pid} exited ({code}); starting it again in 1 s")
        time.sleep(1.0)
    if args.child_pidfile is not None:
        args.child_pidfile.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
