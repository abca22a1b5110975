"""Secrets kept in the data folder: made once, readable by their owner alone, reused after.

A local Engram (``ops/``) needs a Redis password that every process finds with no variable set:
it lives in ``<data_dir>/secrets/redis.password`` (folder 0700, file 0600). ``ensure`` makes it
on first use; :class:`shared.settings.Settings` reads it through ``read`` when
``ENGRAM_REDIS_PASSWORD`` is unset. A secret is never printed by these functions' errors.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from pydantic import SecretStr

from shared.errors import ConfigurationError

SECRETS_FOLDER = "secrets"
REDIS_PASSWORD_FILE = "redis.password"
_FILE_MODE = 0o600
_FOLDER_MODE = 0o700


def redis_password_path(data_dir: Path) -> Path:
    return data_dir / SECRETS_FOLDER / REDIS_PASSWORD_FILE


def read(path: Path) -> SecretStr | None:
    """The secret in ``path`` (one line, surrounding white space dropped), or None if there is no
    such file. An empty or unreadable file is a ``ConfigurationError`` naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"cannot read the secret in {path}: {type(exc).__name__}") from exc
    value = text.strip()
    if not value:
        raise ConfigurationError(f"{path} is empty: delete it and a new secret is made at the next start")
    return SecretStr(value)


def ensure(path: Path) -> SecretStr:
    """The secret in ``path``, made first if there is none: 32 random bytes as URL-safe text
    (letters, digits, ``-`` and ``_``: safe in a URL, a config file and a shell variable).

    A file with looser permissions than 0600 is tightened."""
    path.parent.mkdir(mode=_FOLDER_MODE, parents=True, exist_ok=True)
    with contextlib.suppress(PermissionError):
        os.chmod(path.parent, _FOLDER_MODE)
    existing = read(path)
    if existing is not None:
        if path.stat().st_mode & 0o077:
            os.chmod(path, _FILE_MODE)
        return existing
    # Written whole under a temporary name, then linked into place: os.link fails if the file
    # exists, so two processes starting at once agree on one secret, never read a half-written one.
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _FILE_MODE)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(secrets.token_urlsafe(32) + "\n")
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileExistsError):  # another process made it a moment ago
            os.link(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    made = read(path)
    if made is None:
        raise ConfigurationError(f"{path} vanished as it was made")
    return made
