"""Qdrant Edge, the embedded backup engine: Qdrant's own engine in this process (``qdrant-edge-py``).

The default embedded engine when no server is configured (``ENGRAM_QDRANT_ENGINE=edge``; local
mode with ``local``: see docs/bench/embedded-backup-engine.md for the figures of both). Edge is the
server's engine without the server (payload indexes, a WAL; HNSW only once ``optimize()`` has run,
which Engram does not call: a tenant's search is an exact scan of that tenant's points, cut to
them by the tenant's payload index), where qdrant-client's local mode is an exact scan of every
point in Python.

Layout: one Edge shard per collection, ``<ENGRAM_QDRANT_EDGE_PATH>/<collection>/`` (Edge has no
collections: a shard is one), and beside each shard's own files ``engram.json``, the metadata a
server keeps on the collection (the primary's store id, ``stamp``/``identity``).

Who may open it: one process. Edge takes an exclusive lock on a shard's WAL when it loads it (a
second loader, in another process, fails with ``WouldBlock``), as qdrant-client's local mode
locks its folder. Engram already lives with that: only the worker serving ``write``,
``reconcile`` and ``fallback`` opens the embedded store, and the others reach it through those
queues (a query worker's fallback search through ``fallback``, ``engram restore`` through
``reconcile``). So nothing new is needed: this adapter keeps that one-owner design, and turns a
second opener's lock error into ``ServiceUnavailable`` naming the owner to stop, as the local
adapter does. A file lock of our own would add nothing the WAL's lock does not already give.

Inside the owner, calls on one shard hold this connection's lock: the owner runs a thread pool
(a fallback search may come while a batch is written), and one lock keeps the shard's own
guarantees out of question for a cost of microseconds beside the call.

Every write is guarded by the Memory version, exactly as the server adapter (``qdrant.py``)
does: an upsert carries Edge's conditional-update filter (the point is written when it is new,
or when the version it holds is not newer), a delete is a delete by filter (these ids, with a
version not newer or none).
"""

from __future__ import annotations

import os
import shutil
import threading
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import qdrant_edge as qe

from shared.errors import ServiceUnavailable, VectorStoreRejected
from shared.models import PointState, SearchFilters
from shared.settings import Settings
from shared.stores.base import VectorPoint
from shared.stores.qdrant_payload import (
    HINT,
    IDENTITY_KEY,
    KEYS_KEY,
    KEYWORD_FIELDS,
    STATE_FIELDS,
    collection_name,
    point_state,
    read_json,
    vector_point,
    write_json,
)

if TYPE_CHECKING:
    from shared.stores.qdrant_edge_migration import MigrationReport

METADATA_FILE = "engram.json"
_SHARD_CONFIG = "edge_config.json"
# Room a write asks for on the shard's filesystem: its WAL entry (vectors, payloads) a few times
# over, and never less than the floor (a WAL page, a segment's growth).
_ROOM_FLOOR = 4 * 1024 * 1024
_ROOM_PER_POINT = 4 * 8 * 1024


@contextmanager
def _translated_errors(where: str) -> Iterator[None]:
    """Edge raises ``ValueError`` for input it cannot read (a point id) and a bare ``Exception``
    for the rest: a point it refuses (a vector of another size) is ``VectorStoreRejected``; a
    lock held by another process, a disk error, anything else of the engine is
    ``ServiceUnavailable`` (retried)."""
    try:
        yield
    except (ServiceUnavailable, VectorStoreRejected):
        raise
    except ValueError as exc:
        raise VectorStoreRejected(f"qdrant edge refused {where}: {exc}") from exc
    except Exception as exc:
        message = str(exc)
        if "dimension error" in message or "Wrong input" in message or "Bad input" in message:
            raise VectorStoreRejected(f"qdrant edge refused {where}: {message}") from exc
        if "WouldBlock" in message:
            message = f"the folder is held by another process ({message})"
        raise ServiceUnavailable("qdrant", f"{where}: {type(exc).__name__}: {message}", HINT) from exc


def _version_at_most(version: int) -> qe.Filter:
    """Points whose version is at most this one, or that carry none (written before versions)."""
    return qe.Filter(
        should=[
            qe.FieldCondition(key="version", range=qe.RangeFloat(lte=float(version))),
            qe.IsEmptyCondition(key="version"),
        ]
    )


def _tenant(user_id: str) -> qe.FieldCondition:
    return qe.FieldCondition(key="user_id", match=qe.MatchValue(user_id))


def search_filter(user_id: str, filters: SearchFilters) -> qe.Filter:
    """The tenant and the search filters as Neo4j's ``MEMORY_FILTER`` applies them (the same
    conditions as the server adapter's ``search_filter``, in Edge's types)."""
    must: list[Any] = [_tenant(user_id)]
    for key, value in (
        ("project_id", filters.project_id),
        ("session_id", filters.session_id),
        ("document_id", filters.document_id),
    ):
        if value is not None:
            must.append(qe.FieldCondition(key=key, match=qe.MatchValue(value)))
    for key, values in (
        ("memory_type", filters.memory_types),
        ("tags", filters.tags),  # any of them, as in Neo4j
        ("status", filters.statuses),
    ):
        if values is not None:
            must.append(qe.FieldCondition(key=key, match=qe.MatchAny(list(values))))
    if filters.from_date is not None or filters.to_date is not None:
        dates = qe.RangeDateTime(
            gte=None if filters.from_date is None else filters.from_date.isoformat(),
            lte=None if filters.to_date is None else filters.to_date.isoformat(),
        )
        must.append(qe.FieldCondition(key="created_at", range=dates))
    return qe.Filter(must=must)


class EdgeConnection:
    """The process's Edge shards, one per collection, each loaded on first use."""

    embedded = True

    def __init__(self, settings: Settings, migrate_from: Path | None = None) -> None:
        self._settings = settings
        self.root = settings.qdrant_edge_local_path
        self._lock = threading.RLock()
        self._shards: dict[str, qe.EdgeShard] = {}
        self._collections: dict[str, EdgeStore] = {}
        self._migrate_from = migrate_from
        self._migrated = migrate_from is None

    def _ready(self) -> None:
        """Before the first use in this process: the migration from a local-mode folder."""
        with self._lock:
            if not self._migrated:
                self.migrate()

    def migrate(self, page: int = 512) -> MigrationReport | None:
        """Copies in a local-mode folder left by an earlier version (see ``qdrant_edge_migration.py``:
        resumed where a run stopped; once done, never again); None when there is none. Until it is
        done every call fails as the copy does, and is retried."""
        from shared.stores.qdrant_edge_migration import has_local_folder, migrate_local_folder

        with self._lock:
            self._migrated = True  # the copy's own writes come through this connection
            try:
                if self._migrate_from is None or not has_local_folder(self._migrate_from):
                    return None
                prefix = self._settings.qdrant_collection_prefix
                return migrate_local_folder(self._migrate_from, self, prefix, page)
            except BaseException:
                self._migrated = False
                raise

    @contextmanager
    def shard(self, name: str, dimension: int) -> Iterator[qe.EdgeShard]:
        """This collection's shard for one call, held alone; made (with its payload indexes)
        if the folder holds none yet."""
        with self._lock:
            self._ready()
            if name not in self._shards:
                self.check_room(name, 0)  # loading maps and writes the shard's files too
                with _translated_errors("open shard"):
                    self._shards[name] = self._open(self.root / name, dimension)
            yield self._shards[name]

    def _open(self, folder: Path, dimension: int) -> qe.EdgeShard:
        if (folder / _SHARD_CONFIG).exists():
            return qe.EdgeShard.load(str(folder))
        folder.mkdir(parents=True, exist_ok=True)
        config = qe.EdgeConfig(vectors={"": qe.EdgeVectorParams(size=dimension, distance=qe.Distance.Cosine)})
        shard = qe.EdgeShard.create(str(folder), config)
        shard.update(qe.UpdateOperation.create_field_index("user_id", qe.KeywordIndexParams(is_tenant=True)))
        for field_name in KEYWORD_FIELDS:
            shard.update(qe.UpdateOperation.create_field_index(field_name, qe.PayloadSchemaType.Keyword))
        shard.update(qe.UpdateOperation.create_field_index("version", qe.PayloadSchemaType.Integer))
        shard.update(qe.UpdateOperation.create_field_index("created_at", qe.PayloadSchemaType.Datetime))
        return shard

    def store(self, model: str, dimension: int) -> EdgeStore:
        return self.collection(
            collection_name(self._settings.qdrant_collection_prefix, model, dimension), dimension
        )

    def collection(self, name: str, dimension: int) -> EdgeStore:
        with self._lock:
            if name not in self._collections:
                self._collections[name] = EdgeStore(self, name, dimension)
            return self._collections[name]

    def _collection_names(self) -> list[str]:
        self._ready()
        prefix = f"{self._settings.qdrant_collection_prefix}_"
        if not self.root.is_dir():
            return []
        return sorted(
            p.name for p in self.root.iterdir() if p.name.startswith(prefix) and (p / _SHARD_CONFIG).exists()
        )

    def dimensions_of(self, model: str) -> list[int]:
        """The dimensions of the collections this model has (its name is in theirs)."""
        head = collection_name(self._settings.qdrant_collection_prefix, model, 0)[: -len("0")]
        names = self._collection_names()
        return sorted(int(n[len(head) :]) for n in names if n.startswith(head) and n[len(head) :].isdigit())

    def models(self) -> list[tuple[str, int]]:
        """The (model, dimension) of every Engram collection that holds points, as its points say."""
        found: set[tuple[str, int]] = set()
        for name in self._collection_names():
            with self.shard(name, _dimension_of(name)) as shard, _translated_errors("scroll"):
                points, _ = shard.scroll(
                    qe.ScrollRequest(limit=1, with_payload=["embedding_model", "embedding_dim"])
                )
            payload = (points[0].payload or {}) if points else {}
            model, dim = payload.get("embedding_model"), payload.get("embedding_dim")
            if isinstance(model, str) and isinstance(dim, int):
                found.add((model, dim))
        return sorted(found)

    def drop(self, model: str, dimension: int) -> bool:
        """Deletes a model's collection (a migration's old one); True if it was there."""
        name = collection_name(self._settings.qdrant_collection_prefix, model, dimension)
        with self._lock:
            shard = self._shards.pop(name, None)
            if shard is not None:
                with _translated_errors("close shard"):
                    shard.close()
            folder = self.root / name
            existed = (folder / _SHARD_CONFIG).exists()
            if folder.exists():
                shutil.rmtree(folder)
            self._collections.pop(name, None)
        return existed

    def hold(self) -> Path:
        """Loads every shard (each takes its WAL's lock, so no other process writes meanwhile) and
        flushes it: the folder is then whole on disk, to be copied. Returns the folder."""
        for name in self._collection_names():
            with self.shard(name, _dimension_of(name)) as shard, _translated_errors("flush"):
                shard.flush()
        return self.root

    def check_room(self, name: str, points: int) -> None:
        """Refuses a write (``ServiceUnavailable``, retried) that Edge could not make safely.

        Edge's WAL and payload storage are memory-mapped files: a write that needs a page the
        filesystem cannot give (the disk full, a file that may not be written) is not an error
        it returns, the process dies of SIGBUS (tests/faults/test_edge_storage.py), and with it
        the owner of the folder. So the shard's folder must take writes and its filesystem hold
        room for this one, or the write is not tried. A filesystem filled between this check and
        the write can still kill the process: the check narrows that window, Edge alone can close it."""
        folder = self.root / name
        if not folder.is_dir():
            return  # made by this write's shard
        for place in (folder, folder / "wal"):
            if place.exists() and not os.access(place, os.W_OK):
                raise ServiceUnavailable("qdrant", f"write: {place} takes no writes", HINT)
        stat = os.statvfs(folder)
        free, wanted = stat.f_bavail * stat.f_frsize, max(_ROOM_FLOOR, points * _ROOM_PER_POINT)
        if free < wanted:
            raise ServiceUnavailable(
                "qdrant", f"write: No space left on device ({free} bytes free, {wanted} wanted)", HINT
            )

    def read_metadata(self, name: str) -> dict[str, Any]:
        return read_json(self.root / name / METADATA_FILE)

    def write_metadata(self, name: str, metadata: Mapping[str, Any]) -> None:
        write_json(self.root / name / METADATA_FILE, metadata)

    def close(self) -> None:
        with self._lock:
            shards, self._shards = self._shards, {}
            for shard in shards.values():
                with _translated_errors("close shard"):
                    shard.close()


class EdgeStore:
    """One collection (one Edge shard): the ``VectorStore`` Protocol and the fallback's search."""

    def __init__(self, connection: EdgeConnection, collection: str, dimension: int) -> None:
        self._connection = connection
        self.collection = collection
        self._dimension = dimension

    def close(self) -> None:
        self._connection.close()

    @contextmanager
    def _shard(self, where: str) -> Iterator[qe.EdgeShard]:
        with self._connection.shard(self.collection, self._dimension) as shard, _translated_errors(where):
            yield shard

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        """One update per version (a batch rarely holds more than one), each guarded by it."""
        by_version: dict[int, list[qe.Point]] = defaultdict(list)
        for p in points:
            payload = {**p.payload, "version": p.version}
            vector = p.vector if isinstance(p.vector, list) else list(p.vector)  # floats, as Neo4j's
            by_version[p.version].append(qe.Point(p.id, vector, payload))
        for version, structs in by_version.items():
            operation = qe.UpdateOperation.upsert_points(structs, condition=_version_at_most(version))
            self._connection.check_room(self.collection, len(structs))
            with self._shard("upsert") as shard:
                shard.update(operation)

    def delete(self, versions: Mapping[str, int]) -> None:
        by_version: dict[int, list[str]] = defaultdict(list)
        for point_id, version in versions.items():
            by_version[version].append(point_id)
        for version, ids in by_version.items():
            guard = _version_at_most(version)
            selector = qe.Filter(must=[qe.HasIdCondition(set(ids)), guard])
            self._connection.check_room(self.collection, len(ids))
            with self._shard("delete") as shard:
                shard.update(qe.UpdateOperation.delete_points_by_filter(selector))

    def states(self, ids: Sequence[str]) -> dict[str, PointState]:
        if not ids:
            return {}
        with self._shard("retrieve") as shard:
            points = shard.retrieve(list(ids), with_payload=STATE_FIELDS, with_vector=False)
        return {str(p.id): point_state(p.id, p.payload) for p in points}

    def scroll(self, after: str | None, limit: int) -> tuple[list[PointState], str | None]:
        with self._shard("scroll") as shard:
            points, offset = shard.scroll(
                qe.ScrollRequest(offset=after, limit=limit, with_payload=STATE_FIELDS, with_vector=False)
            )
        return [point_state(p.id, p.payload) for p in points], None if offset is None else str(offset)

    def count(self) -> int:
        """Points in the collection, counted exactly."""
        with self._shard("count") as shard:
            return int(shard.count(qe.CountRequest(exact=True)))

    def identity(self) -> str | None:
        """The store id of the primary this collection was last found in step with."""
        with self._shard("collection info"):
            found = self._connection.read_metadata(self.collection).get(IDENTITY_KEY)
        return found if isinstance(found, str) else None

    def stamp(self, store_id: str) -> None:
        """Records the primary's store id beside the shard (``engram.json``)."""
        with self._shard("update collection"):
            metadata = self._connection.read_metadata(self.collection)
            self._connection.write_metadata(self.collection, {**metadata, IDENTITY_KEY: store_id})

    def backed_up_keys(self) -> list[dict[str, Any]]:
        with self._shard("collection info"):
            found = self._connection.read_metadata(self.collection).get(KEYS_KEY)
        return [dict(row) for row in found] if isinstance(found, list) else []

    def back_up_keys(self, rows: Sequence[Mapping[str, Any]]) -> None:
        with self._shard("update collection"):
            metadata = self._connection.read_metadata(self.collection)
            kept = [dict(row) for row in rows]
            self._connection.write_metadata(self.collection, {**metadata, KEYS_KEY: kept})

    def scroll_payloads(
        self, after: str | None, limit: int, fields: Sequence[str], user_id: str | None = None
    ) -> tuple[list[tuple[str, dict[str, Any]]], str | None]:
        """A page of (id, payload fields) in id order, of one tenant if named; the next offset."""
        tenant = None if user_id is None else qe.Filter(must=[_tenant(user_id)])
        request = qe.ScrollRequest(
            offset=after, limit=limit, filter=tenant, with_payload=list(fields), with_vector=False
        )
        with self._shard("scroll") as shard:
            points, offset = shard.scroll(request)
        rows = [(str(p.id), dict(p.payload or {})) for p in points]
        return rows, None if offset is None else str(offset)

    def retrieve(self, ids: Sequence[str]) -> list[VectorPoint]:
        """These points with their vectors and whole payloads (absent ids are left out)."""
        if not ids:
            return []
        with self._shard("retrieve") as shard:
            points = shard.retrieve(list(ids), with_payload=True, with_vector=True)
        return [vector_point(p.id, p.vector, p.payload) for p in points]

    def search(
        self, vector: Sequence[float], user_id: str, filters: SearchFilters, limit: int
    ) -> list[tuple[dict[str, Any], float]]:
        """The tenant's nearest points passing the filters: (payload, cosine similarity), best first."""
        request = qe.QueryRequest(
            query=qe.Query.Nearest([float(x) for x in vector]),
            filter=search_filter(user_id, filters),
            limit=limit,
            with_payload=True,
            with_vector=False,
        )
        with self._shard("search") as shard:
            found = shard.query(request)
        return [(dict(point.payload or {}), float(point.score)) for point in found]


def _dimension_of(collection: str) -> int:
    """The dimension a collection's name ends with (``prefix_model_dimension``)."""
    last = collection.rsplit("_", 1)[-1]
    return int(last) if last.isdigit() else 0
