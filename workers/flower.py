"""Flower, Celery's own monitor (ops/supervise.py runs it under supervisord, compose as a service):

    python -m workers.flower            # http://127.0.0.1:$ENGRAM_FLOWER_PORT (5555)
    python -m workers.flower password   # the password of user "engram", on stdout

It listens on ``ENGRAM_FLOWER_ADDRESS`` (127.0.0.1; in compose the container's address, published
on the host's loopback only) and asks for basic auth: user ``engram``, the password in
``ENGRAM_FLOWER_PASSWORD`` or else the data folder's ``secrets/flower.password`` (made on first
use, 0600). The password reaches Flower in
its environment (``FLOWER_BASIC_AUTH``), never on a command line. Flower's HTTP API, which can
stop workers and revoke tasks, stays off (``FLOWER_UNAUTHENTICATED_API`` is never set). Its log
lines are Engram's (JSON unless ``ENGRAM_LOG_FORMAT=text``); its metrics are its own, at its
``/metrics``, not in the app's.

Flower itself serves ``/metrics`` and ``/healthcheck`` to anyone (workers, task names, counts) and
answers every password guess (issue 25: 1,116 in 5 s, no 429), and has no option for either.
``guard()`` fixes both in this process before Flower starts: those two pages ask for the same basic
auth as the rest, and past ``ENGRAM_AUTH_FAILURES_PER_ADDRESS`` failed tries from one address within
``ENGRAM_AUTH_FAILURES_WINDOW_S`` that address gets 429 until the window ends.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from pydantic import SecretStr

from shared import logging_setup, metrics, secrets
from shared.settings import Settings, get_settings

USER = "engram"


def password(settings: Settings) -> SecretStr:
    if settings.flower_password is not None:
        return settings.flower_password
    return secrets.ensure(settings.data_dir / secrets.SECRETS_FOLDER / "flower.password")


class Failures:
    """Failed tries per address in a window, in this (one) Flower process."""

    def __init__(self, bound: int, window_s: float) -> None:
        self._bound = bound
        self._window_s = window_s
        self._seen: dict[str, tuple[float, int]] = {}

    def _current(self, address: str) -> tuple[float, int]:
        started, count = self._seen.get(address, (0.0, 0))
        if time.monotonic() - started >= self._window_s:
            return time.monotonic(), 0
        return started, count

    def blocked(self, address: str) -> bool:
        return self._current(address)[1] >= self._bound

    def failed(self, address: str) -> None:
        if len(self._seen) > 10_000:  # bounded: forget the addresses whose window has ended
            now = time.monotonic()
            self._seen = {a: v for a, v in self._seen.items() if now - v[0] < self._window_s}
        started, count = self._current(address)
        self._seen[address] = (started, count + 1)


def guard(settings: Settings) -> None:
    """Flower's metrics and health check behind its basic auth; failed tries bounded per address."""
    import tornado.web
    from flower.views import BaseHandler
    from flower.views.monitor import Healthcheck, Metrics

    for handler in (Metrics, Healthcheck):
        handler.get = tornado.web.authenticated(handler.get)
    failures = Failures(settings.auth_failures_per_address, settings.auth_failures_window_s)
    check = BaseHandler.get_current_user

    def current_user(self: BaseHandler) -> Any:
        address = self.request.remote_ip or "?"
        if failures.blocked(address):
            raise tornado.web.HTTPError(429)
        try:
            return check(self)
        except tornado.web.HTTPError as exc:
            if exc.status_code == 401:
                failures.failed(address)
            raise

    BaseHandler.get_current_user = current_user


def main(argv: list[str]) -> int:
    settings = get_settings()
    if argv[:1] == ["password"]:
        sys.stdout.write(password(settings).get_secret_value())
        return 0
    os.environ.pop("FLOWER_UNAUTHENTICATED_API", None)
    os.environ["FLOWER_BASIC_AUTH"] = f"{USER}:{password(settings).get_secret_value()}"
    logging_setup.configure(logging_setup.resolved_format(settings, service=True) or "json")
    # Flower's own metrics (flower_*) are served at its own /metrics, not merged into the app's.
    metrics.disable_multiprocess()
    guard(settings)
    from celery.bin.celery import main as celery

    sys.argv = [
        "celery",
        "-A",
        "workers.app",
        "flower",
        f"--address={settings.flower_address}",
        f"--port={settings.flower_port}",
        # Flower keeps what it saw in memory only: no state file in the working folder.
        "--persistent=False",
    ]
    celery()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
