"""Every credential the integration tests use, and a check that no log file holds one.

Keys (the ``keys`` fixture) and status-page cookies (``sign_in``) are remembered as they are made;
when the session ends, every file under the data folder's ``logs/`` (the workers', the served
apps', and the in-process app's, written by the same formatter) is read for each of them. So the
fuzz and probe runs, which send thousands of odd requests with real keys, prove that no failure
they cause writes a key or a cookie to a log.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from shared.logging_setup import formatter

USED: set[str] = set()


def remember(secret: str | None) -> None:
    if secret:
        USED.add(secret)


@contextmanager
def in_process_log(logs: Path) -> Iterator[Path]:
    """The in-process app's log lines (the tests' own ``TestClient``), written to a file as a
    served app writes them, for the duration."""
    logs.mkdir(parents=True, exist_ok=True)
    path = logs / "test-in-process.log"
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(formatter("json"))
    handler.setLevel(logging.INFO)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield path
    finally:
        root.removeHandler(handler)
        handler.close()


def found_in(logs: Path) -> list[str]:
    """``file: secret…`` for each remembered secret that some log file holds."""
    found = []
    for path in sorted(p for p in logs.rglob("*") if p.is_file()):
        text = path.read_bytes().decode("utf-8", "replace")
        found += [f"{path.name}: {secret[:12]}…" for secret in sorted(USED) if secret in text]
    return found
