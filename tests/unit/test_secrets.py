"""Secrets of the data folder: made once (0600 in a 0700 folder), reused after, never shown."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

import pytest

from shared import secrets
from shared.errors import ConfigurationError


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_missing_secret_is_made_readable_by_its_owner_alone(tmp_path: Path) -> None:
    # Given a data folder with no secrets yet
    path = secrets.redis_password_path(tmp_path)

    # When the secret is asked for
    made = secrets.ensure(path)

    # Then it is made: long, random, 0600 in a 0700 folder, no other file left beside it
    assert path == tmp_path / "secrets" / "redis.password"
    assert len(made.get_secret_value()) >= 40
    assert _mode(path) == 0o600
    assert _mode(path.parent) == 0o700
    assert [p.name for p in path.parent.iterdir()] == ["redis.password"]


def test_an_existing_secret_is_reused(tmp_path: Path) -> None:
    path = secrets.redis_password_path(tmp_path)
    first = secrets.ensure(path)

    again = secrets.ensure(path)

    assert again.get_secret_value() == first.get_secret_value()
    assert secrets.read(path) == first


def test_each_data_folder_gets_its_own_secret(tmp_path: Path) -> None:
    one = secrets.ensure(secrets.redis_password_path(tmp_path / "a"))
    other = secrets.ensure(secrets.redis_password_path(tmp_path / "b"))

    assert one.get_secret_value() != other.get_secret_value()


def test_a_secret_file_others_can_read_is_tightened(tmp_path: Path) -> None:
    path = secrets.redis_password_path(tmp_path)
    path.parent.mkdir()
    path.write_text("kept\n")
    path.chmod(0o644)

    assert secrets.ensure(path).get_secret_value() == "kept"
    assert _mode(path) == 0o600


def test_processes_starting_at_once_agree_on_one_secret(tmp_path: Path) -> None:
    path = secrets.redis_password_path(tmp_path)
    seen: list[str] = []

    def ask() -> None:
        seen.append(secrets.ensure(path).get_secret_value())

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(seen) == 8 and len(set(seen)) == 1


def test_reading_no_file_is_none_and_an_empty_one_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "redis.password"
    assert secrets.read(path) is None

    path.write_text("  \n")
    with pytest.raises(ConfigurationError, match="is empty"):
        secrets.read(path)
