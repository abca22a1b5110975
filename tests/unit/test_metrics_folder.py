"""The metrics' multiprocess folder is private, parents included."""

from __future__ import annotations

import os
from pathlib import Path

from shared.metrics import private_folder


def test_the_metrics_folder_and_its_missing_parents_are_private_under_a_lax_umask(tmp_path: Path) -> None:
    # Given a umask that would give new folders 0755
    previous = os.umask(0o022)
    try:
        # When the metrics folder is made two levels below an existing folder
        folder = tmp_path / "data" / "metrics" / "host"
        private_folder(folder)
        private_folder(folder)  # and again: nothing to make, no error
    finally:
        os.umask(previous)

    # Then each folder it made is readable by this user alone
    for path in (tmp_path / "data", tmp_path / "data" / "metrics", folder):
        assert path.is_dir() and path.stat().st_mode & 0o777 == 0o700, path
