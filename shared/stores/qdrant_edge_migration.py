"""The upgrade from qdrant-client's local mode to Qdrant Edge: an embedded folder of the first is
copied into the second when the owner process first opens Edge.

Resumable and idempotent: the points go over page by page in id order, each page written with the
adapter's versioned upsert (so a point the pipeline has meanwhile written newer in Edge stays as
it is, and a page copied twice is a no-op), and the offset of the next page is recorded in
``migration.json`` at Edge's root after each page; a crash resumes at the last page recorded. A
collection's stamp (the primary's store id) comes along. The local folder is only read, and is
left in place (``migration.json`` says when it was done: it can be removed after that).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from shared.stores.base import VectorStore
from shared.stores.qdrant_payload import IDENTITY_KEY, read_json, translated_errors, vector_point, write_json

log = logging.getLogger(__name__)

MARKER = "migration.json"
PAGE = 512


class EdgeTarget(Protocol):
    """Where the points go: Edge's connection (``qdrant_edge.EdgeConnection``), named by what the
    copy needs of it, so this module does not import the adapter that calls it."""

    @property
    def root(self) -> Path: ...

    def collection(self, name: str, dimension: int) -> VectorStore: ...


@dataclass
class MigrationReport:
    copied: dict[str, int] = field(default_factory=dict)
    """Points copied in this run, by collection."""
    done: bool = False
    already_done: bool = False


def has_local_folder(local: Path) -> bool:
    """A folder qdrant-client's local mode wrote (its ``meta.json``)."""
    return (local / "meta.json").is_file()


def migrate_local_folder(local: Path, edge: EdgeTarget, prefix: str, page: int = PAGE) -> MigrationReport:
    """Copies every Engram collection of the local-mode folder into Edge, from where a run left off."""
    marker_path = edge.root / MARKER
    marker = read_json(marker_path)
    if marker.get("done_at"):
        return MigrationReport(done=True, already_done=True)
    report = MigrationReport()
    from qdrant_client import QdrantClient
    from qdrant_client import models as qm

    with translated_errors("open the local-mode folder to migrate it"):
        client = QdrantClient(path=str(local))
    try:
        with translated_errors("list collections"):
            names = sorted(
                c.name for c in client.get_collections().collections if c.name.startswith(f"{prefix}_")
            )
        progress: dict[str, Any] = dict(marker.get("collections") or {})
        for name in names:
            state = dict(progress.get(name) or {})
            if state.get("done"):
                continue
            with translated_errors("collection info"):
                config = client.get_collection(name).config
            vectors = config.params.vectors
            store = edge.collection(name, vectors.size if isinstance(vectors, qm.VectorParams) else 0)
            after: str | None = state.get("next")
            copied = 0
            while True:
                with translated_errors("scroll"):
                    points, offset = client.scroll(
                        name, limit=page, offset=after, with_payload=True, with_vectors=True
                    )
                store.upsert([vector_point(p.id, p.vector, p.payload) for p in points])
                copied += len(points)
                after = None if offset is None else str(offset)
                state = {"next": after, "copied": int(state.get("copied", 0)) + len(points)}
                if after is None:
                    break
                progress[name] = state
                write_json(marker_path, {"collections": progress})
            identity = (config.metadata or {}).get(IDENTITY_KEY)
            if isinstance(identity, str) and store.identity() is None:
                store.stamp(identity)
            progress[name] = {**state, "done": True}
            write_json(marker_path, {"collections": progress})
            report.copied[name] = copied
            log.info(
                "copied %d points of %s from the local-mode folder %s into Qdrant Edge", copied, name, local
            )
    finally:
        client.close()
    write_json(
        marker_path, {"collections": progress, "from": str(local), "done_at": datetime.now(UTC).isoformat()}
    )
    report.done = True
    log.info("the local-mode folder %s is in Qdrant Edge now; it is left in place and may be removed", local)
    return report
