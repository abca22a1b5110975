"""Deterministic identities, so a repeated or retried ingestion updates in place.

The caller's document id is unique only within a tenant, so every stored id is a uuid5 of the
tenant and what follows: two tenants can use the same document id without ever meeting.
"""

from __future__ import annotations

import hashlib
import json
import uuid

ENGRAM_NAMESPACE = uuid.UUID("6f1d3a3e-5c53-4c55-9a57-1f0e8a3c2b7d")
_SEPARATOR = "\x1f"  # cannot appear in a validated tenant or document id


def document_key(user_id: str, document_id: str) -> str:
    """The stored id of a tenant's document."""
    return str(uuid.uuid5(ENGRAM_NAMESPACE, f"doc{_SEPARATOR}{user_id}{_SEPARATOR}{document_id}"))


def memory_id(user_id: str, document_id: str, chunk_index: int) -> str:
    """The stored id of one chunk of a tenant's document; also its Qdrant point id."""
    name = f"mem{_SEPARATOR}{user_id}{_SEPARATOR}{document_id}{_SEPARATOR}{chunk_index}"
    return str(uuid.uuid5(ENGRAM_NAMESPACE, name))


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def default_document_id(text: str, *context: str | None) -> str:
    """A document posted without an id is named by its content and context (session, project,
    time said), so posting it again is a no-op but the same words said elsewhere are not. The
    parts are hashed as a JSON list, so no text can pass for another text with a context."""
    name = text if not any(context) else json.dumps([text, *context])
    return "sha256-" + content_hash(name)[:32]
