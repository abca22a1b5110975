"""Where a restore reads from, and ``engram backup``: the primary exported to a file.

A backup file is JSON lines: a header (``engram_backup``, the store id, the model), then one line
per Memory in the shape of a Qdrant point (``id``, ``vector``, ``payload``), so a restore reads a
file just as it reads a collection (``FileSource`` and ``QdrantSource`` are both a
``PointSource``). The export is a read of pages in Memory id order: consistent per page, not across
pages (a document written during the export may be caught half old, half new; its next write or a
reconcile pass after a restore brings it level).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from shared.errors import InvalidInput
from shared.models import Memory
from shared.services.restore import INDEX_FIELDS, INDEX_PAGE
from shared.stores.base import VectorPoint, VectorStore
from shared.stores.neo4j import restore_fields

FORMAT = 1


class QdrantSource:
    is_backup = True

    def __init__(self, store: VectorStore) -> None:
        self._store = store
        self.name = store.collection

    def index(self, tenant: str | None) -> Iterator[tuple[str, dict[str, Any]]]:
        after: str | None = None
        while True:
            rows, after = self._store.scroll_payloads(after, INDEX_PAGE, INDEX_FIELDS, tenant)
            yield from rows
            if after is None:
                return

    def read(self, ids: Sequence[str]) -> list[VectorPoint]:
        return self._store.retrieve(ids)

    def identity(self) -> str | None:
        return self._store.identity()

    def backed_up_keys(self) -> list[dict[str, Any]]:
        return self._store.backed_up_keys()

    def count(self) -> int:
        return self._store.count()


class FileSource:
    """A backup file, indexed once (each point's offset kept) and read point by point."""

    is_backup = False

    def __init__(self, path: Path) -> None:
        self.name = str(path)
        self._path = path
        self._offsets: dict[str, int] = {}
        with path.open("rb") as file:
            try:
                header = json.loads(file.readline())
            except ValueError as exc:
                raise InvalidInput(f"{path} is not an engram backup: {exc}") from exc
        if not isinstance(header, dict) or header.get("engram_backup") != FORMAT:
            raise InvalidInput(f"{path} is not an engram backup (format {FORMAT})")
        self._header = header

    def index(self, tenant: str | None) -> Iterator[tuple[str, dict[str, Any]]]:
        with self._path.open("rb") as file:
            file.readline()
            while True:
                offset = file.tell()
                line = file.readline()
                if not line:
                    return
                point = json.loads(line)
                payload = point.get("payload") or {}
                if tenant is not None and payload.get("user_id") != tenant:
                    continue
                self._offsets[str(point["id"])] = offset
                yield str(point["id"]), {k: payload.get(k) for k in INDEX_FIELDS}

    def read(self, ids: Sequence[str]) -> list[VectorPoint]:
        found: list[VectorPoint] = []
        with self._path.open("rb") as file:
            for point_id in ids:
                offset = self._offsets.get(point_id)
                if offset is None:
                    continue
                file.seek(offset)
                point = json.loads(file.readline())
                payload = dict(point.get("payload") or {})
                version = payload.get("version")
                found.append(
                    VectorPoint(
                        id=point_id,
                        vector=[float(x) for x in point.get("vector") or []],
                        version=int(version) if isinstance(version, int) else 0,
                        payload=payload,
                    )
                )
        return found

    def identity(self) -> str | None:
        found = self._header.get("store_id")
        return found if isinstance(found, str) else None

    def backed_up_keys(self) -> list[dict[str, Any]]:
        found = self._header.get("api_keys")
        return [dict(row) for row in found] if isinstance(found, list) else []

    def count(self) -> int:
        """The points indexed (all of the file, or of the tenant asked for)."""
        return len(self._offsets)


class Exportable(Protocol):
    def export_page(self, after: str | None, tenant: str | None, limit: int) -> list[dict[str, Any]]: ...


def export(
    graph: Exportable,
    path: Path,
    store_id: str | None,
    tenant: str | None = None,
    page: int = 512,
    progress: Callable[[int], None] | None = None,
    keys: list[dict[str, Any]] | None = None,
) -> int:
    """Writes every Memory (of one tenant if named) to ``path`` as a backup file (mode 0600),
    the API key rows (as Neo4j holds them: hashes, sealed secrets) in its header; returns how
    many Memories. Written to a temporary name and renamed at the end, so a file by that name
    is whole."""
    partial = path.with_name(path.name + ".partial")
    count = 0
    after: str | None = None
    # Every tenant's text: readable by its owner only, as the data folder is.
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        header = {"engram_backup": FORMAT, "store_id": store_id, "tenant": tenant, "api_keys": keys or []}
        out.write(json.dumps(header) + "\n")
        while True:
            rows = graph.export_page(after, tenant, page)
            if not rows:
                break
            for row in rows:
                memory = dict(row["memory"])
                vector = memory.pop("embedding", None)
                if vector is None:
                    continue
                payload = {
                    **Memory.model_validate(memory).payload(),
                    **restore_fields(row["document"], memory.get("updated_at")),
                    "version": int(memory.get("version") or 0),
                }
                out.write(json.dumps({"id": memory["id"], "vector": vector, "payload": payload}) + "\n")
                count += 1
            after = rows[-1]["memory"]["id"]
            if progress is not None:
                progress(count)
        out.flush()
        os.fsync(out.fileno())
    partial.replace(path)
    return count
