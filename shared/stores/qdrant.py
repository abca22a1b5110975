"""Qdrant, the backup vector store: a server when ``ENGRAM_QDRANT_URL`` is set, else embedded.

One ``QdrantConnection`` per process holds the client; each model's collection is a
``QdrantStore`` on it, so a process that syncs Memories of two models opens an embedded folder
once (a second opener of the same folder fails). Every write is guarded by the Memory version in
the payload: a point holding a newer version is never overwritten or deleted by an older write.

The embedded client is not thread-safe, and its owner runs a thread pool (a fallback search may
come while a batch is written): every call on it holds the connection's one lock. A server
client is called freely.
"""

from __future__ import annotations

import logging
import re
import threading
import warnings
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from qdrant_client import QdrantClient
from qdrant_client import models as qm
from qdrant_client.http.exceptions import UnexpectedResponse

from shared.errors import ConfigurationError, ServiceUnavailable
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
    translated_errors,
)

log = logging.getLogger(__name__)

# The oldest server with what the adapter writes through: a conditional upsert (``update_filter``,
# the version guard) and collection metadata (the primary's identity, the backed-up keys).
MIN_SERVER_VERSION = (1, 16)


def _check_server_version(version: str) -> None:
    found = tuple(int(part) for part in re.findall(r"\d+", version)[:2])
    if len(found) < 2 or found[0] != MIN_SERVER_VERSION[0] or found < MIN_SERVER_VERSION:
        wanted = ".".join(map(str, MIN_SERVER_VERSION))
        raise ConfigurationError(
            f"the Qdrant server at ENGRAM_QDRANT_URL is {version}; Engram needs {wanted} or a later 1.x"
        )


def _loopback(url: str | None) -> bool:
    host = urlsplit(url or "").hostname or ""
    return host == "localhost" or host == "::1" or host.startswith("127.")


def _version_at_most(version: int) -> qm.Filter:
    """Points whose version is at most this one, or that carry none (written before versions)."""
    return qm.Filter(
        should=[
            qm.FieldCondition(key="version", range=qm.Range(lte=version)),
            qm.IsEmptyCondition(is_empty=qm.PayloadField(key="version")),
        ]
    )


def search_filter(user_id: str, filters: SearchFilters) -> qm.Filter:
    """The tenant and the search filters as Neo4j's ``MEMORY_FILTER`` applies them."""
    must: list[qm.Condition] = [qm.FieldCondition(key="user_id", match=qm.MatchValue(value=user_id))]
    for key, value in (
        ("project_id", filters.project_id),
        ("session_id", filters.session_id),
        ("document_id", filters.document_id),
    ):
        if value is not None:
            must.append(qm.FieldCondition(key=key, match=qm.MatchValue(value=value)))
    if filters.memory_types is not None:
        must.append(qm.FieldCondition(key="memory_type", match=qm.MatchAny(any=list(filters.memory_types))))
    if filters.tags is not None:  # any of them, as in Neo4j
        must.append(qm.FieldCondition(key="tags", match=qm.MatchAny(any=list(filters.tags))))
    if filters.statuses is not None:
        must.append(qm.FieldCondition(key="status", match=qm.MatchAny(any=list(filters.statuses))))
    if filters.from_date is not None or filters.to_date is not None:
        dates = qm.DatetimeRange(gte=filters.from_date, lte=filters.to_date)
        must.append(qm.FieldCondition(key="created_at", range=dates))
    return qm.Filter(must=must)


class QdrantConnection:
    """The process's one Qdrant client, made on first use so an outage surfaces in an operation."""

    def __init__(self, settings: Settings, client: QdrantClient | None = None) -> None:
        self._settings = settings
        self._client = client
        self._lock = threading.RLock()
        self.embedded = settings.qdrant_url is None
        self._collections: dict[str, QdrantStore] = {}

    def client(self) -> QdrantClient:
        with self._lock:
            if self._client is None:
                with translated_errors("connect"):
                    self._client = self._connect()
            return self._client

    @contextmanager
    def using(self) -> Iterator[QdrantClient]:
        """The client, held alone for the call when it is embedded (its local mode is not
        thread-safe); a server client is shared."""
        with self._lock if self.embedded else nullcontext():
            yield self.client()

    def hold(self) -> Path:
        """Opens the embedded folder (its lock: no other process writes meanwhile) and names it."""
        self.client()
        return self._settings.qdrant_local_path

    def _connect(self) -> QdrantClient:
        settings = self._settings
        if self.embedded:
            settings.qdrant_local_path.mkdir(parents=True, exist_ok=True)
            return QdrantClient(path=str(settings.qdrant_local_path))
        api_key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        with warnings.catch_warnings():
            if _loopback(settings.qdrant_url):
                # The key never leaves this machine: plain HTTP is how ops/qdrant-server serves it.
                warnings.filterwarnings("ignore", "Api key is used with an insecure connection")
            client = QdrantClient(
                url=settings.qdrant_url,
                api_key=api_key,
                timeout=int(settings.qdrant_timeout_s),
                # The client's own check warns from a thread of its own, past any minor version
                # apart; ours refuses, at the connection, only a server without what we use.
                check_compatibility=False,
            )
        try:
            _check_server_version(client.info().version)
        except BaseException:
            client.close()
            raise
        return client

    def store(self, model: str, dimension: int) -> QdrantStore:
        name = collection_name(self._settings.qdrant_collection_prefix, model, dimension)
        with self._lock:
            if name not in self._collections:
                self._collections[name] = QdrantStore(self, name, dimension)
            return self._collections[name]

    def dimensions_of(self, model: str) -> list[int]:
        """The dimensions of the collections this model has (its name is in theirs)."""
        head = collection_name(self._settings.qdrant_collection_prefix, model, 0)[: -len("0")]
        with self.using() as client, translated_errors("list collections"):
            names = [c.name for c in client.get_collections().collections]
        return sorted(int(n[len(head) :]) for n in names if n.startswith(head) and n[len(head) :].isdigit())

    def models(self) -> list[tuple[str, int]]:
        """The (model, dimension) of every Engram collection that holds points, as its points say:
        what the backup holds even when the primary knows of none (a wiped Neo4j)."""
        prefix = f"{self._settings.qdrant_collection_prefix}_"
        found: set[tuple[str, int]] = set()
        with self.using() as client, translated_errors("list collections"):
            for collection in client.get_collections().collections:
                if not collection.name.startswith(prefix):
                    continue
                points, _ = client.scroll(
                    collection.name, limit=1, with_payload=["embedding_model", "embedding_dim"]
                )
                payload = (points[0].payload or {}) if points else {}
                model, dimension = payload.get("embedding_model"), payload.get("embedding_dim")
                if isinstance(model, str) and isinstance(dimension, int):
                    found.add((model, dimension))
        return sorted(found)

    def drop(self, model: str, dimension: int) -> bool:
        """Deletes a model's collection (a migration's old one); True if it was there."""
        name = collection_name(self._settings.qdrant_collection_prefix, model, dimension)
        with self.using() as client, translated_errors("drop collection"):
            existed = client.collection_exists(name)
            if existed:
                client.delete_collection(name)
            store = self._collections.pop(name, None)
            if store is not None:
                store.forget_collection()
        return bool(existed)

    def snapshot_into(self, collection: str, folder: Path) -> Path:
        """A server's snapshot of one collection, downloaded into ``folder`` and then deleted on
        the server: the backup is the folder's, as Neo4j's export is, not on the disk it guards
        (nor filling it, one snapshot a backup)."""
        with self.using() as client, translated_errors("snapshot"):
            made = client.create_snapshot(collection, wait=True)
        if made is None:
            raise ServiceUnavailable("qdrant", f"snapshot of {collection}: the server named none", HINT)
        target = folder / made.name
        partial = target.with_name(f"{made.name}.partial")
        api_key = self._settings.qdrant_api_key
        headers = {"api-key": api_key.get_secret_value()} if api_key else {}
        url = f"{str(self._settings.qdrant_url).rstrip('/')}/collections/{collection}/snapshots/{made.name}"
        try:
            with (
                translated_errors("snapshot download"),
                httpx.stream(
                    "GET", url, headers=headers, timeout=self._settings.qdrant_timeout_s
                ) as response,
            ):
                response.raise_for_status()
                with partial.open("wb") as out:
                    for chunk in response.iter_bytes(1 << 20):
                        out.write(chunk)
            partial.replace(target)
        finally:
            partial.unlink(missing_ok=True)
            with self.using() as client, translated_errors("snapshot delete"):
                client.delete_snapshot(collection, made.name, wait=True)
        return target

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
        for store in self._collections.values():
            store.forget_collection()


class QdrantStore:
    def __init__(self, connection: QdrantConnection, collection: str, dimension: int) -> None:
        self._connection = connection
        self.collection = collection
        self._dimension = dimension
        self._ready = False

    def forget_collection(self) -> None:
        self._ready = False

    def close(self) -> None:
        self._connection.close()

    @contextmanager
    def _client(self) -> Iterator[QdrantClient]:
        """The connection's client for one call (under its lock when embedded), the collection made
        if it is not there yet."""
        with self._connection.using() as client:
            if not self._ready:
                with translated_errors("ensure collection"):
                    if not client.collection_exists(self.collection):
                        self._create_collection(client)
                self._ready = True
            yield client

    def _create_collection(self, client: QdrantClient) -> None:
        try:
            client.create_collection(
                self.collection,
                vectors_config=qm.VectorParams(size=self._dimension, distance=qm.Distance.COSINE),
            )
        except UnexpectedResponse as exc:
            # Another process made it between our look and our make (two write workers starting on
            # one server): it is there, and its indexes are made again below (each call idempotent).
            if exc.status_code != 409:
                raise
        if self._connection.embedded:
            return  # payload indexes are no-ops in embedded mode
        client.create_payload_index(
            self.collection,
            "user_id",
            field_schema=qm.KeywordIndexParams(type=qm.KeywordIndexType.KEYWORD, is_tenant=True),
        )
        for name in KEYWORD_FIELDS:
            client.create_payload_index(self.collection, name, field_schema=qm.PayloadSchemaType.KEYWORD)
        client.create_payload_index(self.collection, "version", field_schema=qm.PayloadSchemaType.INTEGER)
        client.create_payload_index(self.collection, "created_at", field_schema=qm.PayloadSchemaType.DATETIME)

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        """One call per version (a batch rarely holds more than one), each guarded by it."""
        by_version: dict[int, list[qm.PointStruct]] = defaultdict(list)
        for p in points:
            payload = {**p.payload, "version": p.version}
            by_version[p.version].append(
                qm.PointStruct(id=p.id, vector=[float(x) for x in p.vector], payload=payload)
            )
        for version, structs in by_version.items():
            with self._client() as client, translated_errors("upsert"):
                client.upsert(
                    self.collection, points=structs, wait=True, update_filter=_version_at_most(version)
                )

    def delete(self, versions: Mapping[str, int]) -> None:
        by_version: dict[int, list[str]] = defaultdict(list)
        for point_id, version in versions.items():
            by_version[version].append(point_id)
        for version, ids in by_version.items():
            guard = _version_at_most(version)
            selector = qm.FilterSelector(
                filter=qm.Filter(must=[qm.HasIdCondition(has_id=list(ids))], should=guard.should)
            )
            with self._client() as client, translated_errors("delete"):
                client.delete(self.collection, points_selector=selector, wait=True)

    def states(self, ids: Sequence[str]) -> dict[str, PointState]:
        if not ids:
            return {}
        with self._client() as client, translated_errors("retrieve"):
            points = client.retrieve(
                self.collection, ids=list(ids), with_payload=STATE_FIELDS, with_vectors=False
            )
        return {str(p.id): point_state(p.id, p.payload) for p in points}

    def scroll(self, after: str | None, limit: int) -> tuple[list[PointState], str | None]:
        with self._client() as client, translated_errors("scroll"):
            points, offset = client.scroll(
                self.collection, limit=limit, offset=after, with_payload=STATE_FIELDS, with_vectors=False
            )
        return [point_state(p.id, p.payload) for p in points], None if offset is None else str(offset)

    def count(self) -> int:
        """Points in the collection, counted exactly."""
        with self._client() as client, translated_errors("count"):
            return int(client.count(self.collection, exact=True).count)

    def identity(self) -> str | None:
        """The store id of the primary this collection was last found in step with (its metadata)."""
        with self._client() as client, translated_errors("collection info"):
            metadata = client.get_collection(self.collection).config.metadata or {}
        found = metadata.get(IDENTITY_KEY)
        return found if isinstance(found, str) else None

    def stamp(self, store_id: str) -> None:
        """Records the primary's store id in the collection's metadata."""
        with self._client() as client, translated_errors("update collection"):
            client.update_collection(self.collection, metadata={IDENTITY_KEY: store_id})

    def backed_up_keys(self) -> list[dict[str, Any]]:
        with self._client() as client, translated_errors("collection info"):
            metadata = client.get_collection(self.collection).config.metadata or {}
        found = metadata.get(KEYS_KEY)
        return [dict(row) for row in found] if isinstance(found, list) else []

    def back_up_keys(self, rows: Sequence[Mapping[str, Any]]) -> None:
        with self._client() as client, translated_errors("update collection"):
            client.update_collection(self.collection, metadata={KEYS_KEY: [dict(row) for row in rows]})

    def scroll_payloads(
        self, after: str | None, limit: int, fields: Sequence[str], user_id: str | None = None
    ) -> tuple[list[tuple[str, dict[str, Any]]], str | None]:
        """A page of (id, payload fields) in id order, of one tenant if named; the next offset."""
        tenant = (
            None
            if user_id is None
            else qm.Filter(must=[qm.FieldCondition(key="user_id", match=qm.MatchValue(value=user_id))])
        )
        with self._client() as client, translated_errors("scroll"):
            points, offset = client.scroll(
                self.collection,
                limit=limit,
                offset=after,
                scroll_filter=tenant,
                with_payload=list(fields),
                with_vectors=False,
            )
        rows = [(str(p.id), dict(p.payload or {})) for p in points]
        return rows, None if offset is None else str(offset)

    def retrieve(self, ids: Sequence[str]) -> list[VectorPoint]:
        """These points with their vectors and whole payloads (absent ids are left out)."""
        if not ids:
            return []
        with self._client() as client, translated_errors("retrieve"):
            points = client.retrieve(self.collection, ids=list(ids), with_payload=True, with_vectors=True)
        found: list[VectorPoint] = []
        for p in points:
            payload = dict(p.payload or {})
            version = payload.get("version")
            vector = p.vector if isinstance(p.vector, list) else []
            found.append(
                VectorPoint(
                    id=str(p.id),
                    vector=[float(x) for x in vector if isinstance(x, int | float)],
                    version=int(version) if isinstance(version, int | float) else 0,
                    payload=payload,
                )
            )
        return found

    def search(
        self, vector: Sequence[float], user_id: str, filters: SearchFilters, limit: int
    ) -> list[tuple[dict[str, Any], float]]:
        """The tenant's nearest points passing the filters: (payload, cosine similarity), best first."""
        with self._client() as client, translated_errors("search"):
            found = client.query_points(
                self.collection,
                query=[float(x) for x in vector],
                query_filter=search_filter(user_id, filters),
                limit=limit,
                with_payload=True,
                with_vectors=False,
            )
        return [(point.payload or {}, float(point.score)) for point in found.points]
