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
``/metrics`` (behind the same basic auth), not in the app's.
"""

from __future__ import annotations

import os
import sys

from pydantic import SecretStr

from shared import logging_setup, metrics, secrets
from shared.settings import Settings, get_settings

USER = "engram"


def password(settings: Settings) -> SecretStr:
    if settings.flower_password is not None:
        return settings.flower_password
    return secrets.ensure(settings.data_dir / secrets.SECRETS_FOLDER / "flower.password")


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
