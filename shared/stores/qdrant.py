"""Qdrant, the backup vector store: a server when ``ENGRAM_QDRANT_URL`` is set, else embedded.

An embedded folder can be opened by one process only; the worker that serves the ``write`` and
``reconcile`` queues owns it, and a second opener gets a clear ``ServiceUnavailable``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import httpx
from qdrant_client import QdrantClient
from qdrant_client import models as qm
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from shared.errors import ServiceUnavailable
from shared.settings import Settings
from shared.stores.base import VectorPoint

KEYWORD_FIELDS = ("project_id", "session_id", "memory_type", "document_id", "tags", "content_hash")


def collection_name(prefix: str, model: str, dimension: int) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")
    return f"{prefix}_{slug}_{dimension}"


@contextmanager
def _translated_errors(where: str) -> Iterator[None]:
    hint = "check ENGRAM_QDRANT_URL, or let one worker own the embedded folder"
    try:
        yield
    except (ResponseHandlingException, httpx.HTTPError, OSError) as exc:
        raise ServiceUnavailable("qdrant", f"{where}: {exc}", hint) from exc
    except UnexpectedResponse as exc:
        raise ServiceUnavailable(
            "qdrant", f"{where}: HTTP {exc.status_code} {exc.reason_phrase}", hint
        ) from exc
    except RuntimeError as exc:  # the embedded client's "folder already accessed" lock error
        raise ServiceUnavailable("qdrant", f"{where}: {exc}", hint) from exc


class QdrantStore:
    def __init__(
        self, settings: Settings, dimension: int, model: str, client: QdrantClient | None = None
    ) -> None:
        self._settings = settings
        self._dimension = dimension
        self.collection = collection_name(settings.qdrant_collection_prefix, model, dimension)
        self.embedded = settings.qdrant_url is None
        self._client_instance = client
        self._collection_ready = False

    def _client(self) -> QdrantClient:
        """Connects, and makes the collection, on first use: an outage surfaces in the operation."""
        if not self._collection_ready:
            self.ensure_collection()
        return self._connected()

    def _connected(self) -> QdrantClient:
        if self._client_instance is None:
            with _translated_errors("connect"):
                self._client_instance = self._connect()
        return self._client_instance

    def _connect(self) -> QdrantClient:
        settings = self._settings
        if self.embedded:
            settings.qdrant_local_path.mkdir(parents=True, exist_ok=True)
            return QdrantClient(path=str(settings.qdrant_local_path))
        api_key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        return QdrantClient(url=settings.qdrant_url, api_key=api_key, timeout=int(settings.qdrant_timeout_s))

    def close(self) -> None:
        if self._client_instance is not None:
            self._client_instance.close()
            self._client_instance = None
            self._collection_ready = False

    def ensure_collection(self) -> None:
        client = self._connected()
        with _translated_errors("ensure collection"):
            if not client.collection_exists(self.collection):
                self._create_collection(client)
        self._collection_ready = True

    def _create_collection(self, client: QdrantClient) -> None:
        client.create_collection(
            self.collection,
            vectors_config=qm.VectorParams(size=self._dimension, distance=qm.Distance.COSINE),
        )
        if self.embedded:
            return  # payload indexes are no-ops in embedded mode
        client.create_payload_index(
            self.collection,
            "user_id",
            field_schema=qm.KeywordIndexParams(type=qm.KeywordIndexType.KEYWORD, is_tenant=True),
        )
        for name in KEYWORD_FIELDS:
            client.create_payload_index(self.collection, name, field_schema=qm.PayloadSchemaType.KEYWORD)
        client.create_payload_index(self.collection, "created_at", field_schema=qm.PayloadSchemaType.DATETIME)

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        if not points:
            return
        structs = [
            qm.PointStruct(id=p.id, vector=[float(x) for x in p.vector], payload=p.payload) for p in points
        ]
        with _translated_errors("upsert"):
            self._client().upsert(self.collection, points=structs, wait=True)

    def delete(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        with _translated_errors("delete"):
            self._client().delete(
                self.collection, points_selector=qm.PointIdsList(points=list(ids)), wait=True
            )
