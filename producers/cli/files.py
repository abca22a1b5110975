"""Reading documents from paths for the CLI: text files, folders of them, and JSONL.

Every file is read and every document validated before anything is enqueued, so a bad line
anywhere stops the load with its file and line named and nothing half-loaded. A JSONL line is
parsed as strictly as an HTTP body (producers/http/wire.py): a key twice, NaN or Infinity, a lone
surrogate or nesting too deep for the parser is refused, not loaded.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from producers.http.wire import StrictJsonError, loads_strict
from shared.errors import InvalidInput
from shared.models import DocumentIn

TEXT_SUFFIXES = frozenset({".txt", ".md", ".markdown", ".rst", ".text"})
JSONL_SUFFIXES = frozenset({".jsonl", ".ndjson"})
# BEIR and similar corpora name the id ``_id``.
FIELD_ALIASES = {"_id": "id"}


def read_documents(paths: Sequence[Path], defaults: dict[str, Any]) -> list[DocumentIn]:
    """``defaults`` (user_id, project_id, ...) fill what a document does not say itself."""
    documents: list[DocumentIn] = []
    for path in paths:
        if not path.exists():
            raise InvalidInput(f"{path}: no such file or folder")
        if path.is_dir():
            for file in sorted(p for p in path.rglob("*") if p.is_file() and _readable(p)):
                documents.extend(_read_file(file, file.relative_to(path).as_posix(), defaults))
        else:
            documents.extend(_read_file(path, path.name, defaults))
    if not documents:
        raise InvalidInput("no documents found in " + ", ".join(str(p) for p in paths))
    return documents


def read_file(path: Path, name: str, defaults: dict[str, Any]) -> list[DocumentIn]:
    """The documents of one file (``name``: its id when it is a text file), or InvalidInput."""
    return list(_read_file(path, name, defaults))


def readable(path: Path) -> bool:
    """A file whose kind is read (text or JSONL), by its suffix."""
    return _readable(path)


def _readable(path: Path) -> bool:
    return path.suffix.lower() in TEXT_SUFFIXES | JSONL_SUFFIXES


def _read_file(path: Path, name: str, defaults: dict[str, Any]) -> Iterator[DocumentIn]:
    if path.suffix.lower() in JSONL_SUFFIXES:
        yield from _read_jsonl(path, defaults)
        return
    text = _decode(path, path.read_bytes())
    fields = {
        "id": name,
        "title": path.stem,
        "uri": path.resolve().as_uri(),
        "source": "cli",
        "text": text,
    }
    yield _validated({**defaults, **fields}, f"{path}")


def _read_jsonl(path: Path, defaults: dict[str, Any]) -> Iterator[DocumentIn]:
    for number, raw in enumerate(path.read_bytes().splitlines(), start=1):
        line = _decode(path, raw, number).removeprefix("\ufeff").strip()
        if not line:
            continue
        try:
            record = loads_strict(line, "the line")
        except StrictJsonError as exc:
            raise InvalidInput(f"{path}:{number}: {exc}") from exc
        if not isinstance(record, dict):
            raise InvalidInput(f"{path}:{number}: expected a JSON object per line")
        for alias, name in FIELD_ALIASES.items():
            if alias in record and name in record:
                raise InvalidInput(f"{path}:{number}: both {alias!r} and {name!r}: which is meant?")
        record = {FIELD_ALIASES.get(key, key): value for key, value in record.items()}
        if record.get("metadata") == {}:
            record.pop("metadata")
        yield _validated({"source": "cli", **defaults, **record}, f"{path}:{number}")


def _decode(path: Path, raw: bytes, line: int | None = None) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = f"{path}:{line}" if line else str(path)
        raise InvalidInput(f"{where}: not UTF-8 text (byte {exc.start})") from exc


def _validated(fields: dict[str, Any], where: str) -> DocumentIn:
    try:
        return DocumentIn.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'document'}: {error['msg']}"
            for error in exc.errors()
        )
        raise InvalidInput(f"{where}: {problems}") from exc
