"""What the two Qdrant adapters share: the payload they write and read, a collection's name and
metadata, and how qdrant-client's errors read as Engram's.

The server (and local-mode) adapter ``qdrant.py`` and the Qdrant Edge adapter ``qdrant_edge.py``
write the same payload (the Memory's fields, its version, content hash and embedding model) and
read the same ``PointState`` back, so a backup written by one is restored by the other; the
migration from local mode to Edge (``qdrant_edge_migration.py``) reads with the first and writes
with the second. Each of the three imports this module, and this module none of them.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from billiard.exceptions import SoftTimeLimitExceeded
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from shared.errors import ConfigurationError, ServiceUnavailable, VectorStoreRejected
from shared.models import PointState
from shared.stores.base import VectorPoint

KEYWORD_FIELDS = ("project_id", "session_id", "memory_type", "document_id", "tags", "content_hash", "status")
STATE_FIELDS = ["version", "content_hash", "embedding_model"]
HINT = "check ENGRAM_QDRANT_URL, or let one worker own the embedded folder"
_RETRYABLE_STATUS = {408, 429}
_KEY_REFUSED_STATUS = {401, 403}
IDENTITY_KEY = "engram_store_id"
# The API keys, as Neo4j holds them (secret hashes, sealed signing secrets), for engram restore.
KEYS_KEY = "engram_api_keys"


def collection_name(prefix: str, model: str, dimension: int) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")
    return f"{prefix}_{slug}_{dimension}"


@contextmanager
def translated_errors(where: str) -> Iterator[None]:
    """qdrant-client's errors, a server's or its local mode's: outages and server faults are
    ``ServiceUnavailable`` (retried); a request Qdrant refuses is ``VectorStoreRejected`` (never
    retried as it is)."""
    try:
        yield
    except UnexpectedResponse as exc:
        message = f"{where}: HTTP {exc.status_code} {exc.reason_phrase}"
        status = exc.status_code or 500
        if status in _KEY_REFUSED_STATUS:
            raise ConfigurationError(
                f"qdrant refused the API key ({message}): set ENGRAM_QDRANT_API_KEY to the server's key"
            ) from exc
        if 400 <= status < 500 and status not in _RETRYABLE_STATUS:
            raise VectorStoreRejected(f"qdrant refused {message}") from exc
        raise ServiceUnavailable("qdrant", message, HINT) from exc
    except (ResponseHandlingException, httpx.HTTPError, OSError, sqlite3.Error) as exc:
        stopped = _time_limit_in(exc)
        if stopped is not None:
            raise stopped from None
        raise ServiceUnavailable("qdrant", f"{where}: {type(exc).__name__}: {exc}", HINT) from exc
    except RuntimeError as exc:  # the embedded client's "folder already accessed" lock error
        raise ServiceUnavailable("qdrant", f"{where}: {exc}", HINT) from exc
    except ValueError as exc:  # the embedded client's check of a point (a vector of the wrong size)
        raise VectorStoreRejected(f"qdrant refused {where}: {exc}") from exc


def _time_limit_in(exc: BaseException) -> SoftTimeLimitExceeded | None:
    """The task's soft time limit, when it is what qdrant-client wrapped (it wraps whatever its
    request raised): the task must stop and be retried, not take it for an outage. Taken for one,
    the write stage recorded its Memories' sync failed for the reconciler and called its documents
    done, on a busy machine with Memories missing from Qdrant until the next pass."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None or isinstance(seen, SoftTimeLimitExceeded):
            return seen
        source = getattr(seen, "source", None)
        seen = source if isinstance(source, BaseException) else (seen.__cause__ or seen.__context__)
    return None


def point_state(point_id: object, payload: Mapping[str, object] | None) -> PointState:
    """What the sync and the reconciler compare of a point: its version, content hash and model."""
    payload = payload or {}
    version = payload.get("version")
    hash_ = payload.get("content_hash")
    model = payload.get("embedding_model")
    return PointState(
        id=str(point_id),
        version=int(version) if isinstance(version, int | float) else None,
        content_hash=hash_ if isinstance(hash_, str) else None,
        embedding_model=model if isinstance(model, str) else None,
    )


def vector_point(point_id: object, vector: object, payload: Mapping[str, Any] | None) -> VectorPoint:
    """A point as read back (Edge's, or local mode's for the migration): version 0 when it has none."""
    whole = dict(payload or {})
    version = whole.get("version")
    values = vector if isinstance(vector, list) else []
    return VectorPoint(
        id=str(point_id),
        vector=[float(x) for x in values if isinstance(x, int | float)],
        version=int(version) if isinstance(version, int | float) else 0,
        payload=whole,
    )


def read_json(path: Path) -> dict[str, Any]:
    """The object a JSON file holds (a collection's metadata beside Edge's shard, the migration's
    marker); {} when there is no file (or it holds no object)."""
    try:
        found = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ServiceUnavailable("qdrant", f"read {path}: {exc}", HINT) from exc
    return found if isinstance(found, dict) else {}


def write_json(path: Path, marker: Mapping[str, Any]) -> None:
    """Written whole and renamed into place, so a crash leaves the old file or the new one."""
    partial = path.with_name(f"{path.name}.partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with partial.open("w") as out:
            json.dump(dict(marker), out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, path)
    except OSError as exc:
        raise ServiceUnavailable("qdrant", f"write {path}: {exc}", HINT) from exc
