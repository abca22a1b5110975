"""API keys travel with the backup: a primary brought back lets its old clients in again.

Keys live in Neo4j only (``shared/stores/neo4j_keys.py``): lost with the primary, they would
lock out every client, n8n included, until new keys were made and handed out. So each reconcile
pass that finds the primary in step keeps the key rows beside each Qdrant collection, exactly as
Neo4j holds them (the secret's hash, the signing secret sealed with the data folder's key: never
a secret in clear), and ``engram restore`` merges them back. A key already in the primary (made
during the loss) is kept; a revocation in either is kept.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Protocol

from shared.stores.base import VectorStore

log = logging.getLogger(__name__)
FIELDS = ("id", "name", "scope", "tenant", "secret_hash", "signing_secret", "created_at", "revoked_at")


class KeyRows(Protocol):
    def key_rows(self) -> list[dict[str, Any]]: ...

    def restore_key_rows(self, rows: list[dict[str, Any]]) -> int: ...


def back_up(keys: KeyRows, stores: Iterable[VectorStore]) -> int:
    """Keeps the primary's key rows beside each collection; returns how many keys."""
    rows = [{name: row.get(name) for name in FIELDS} for row in keys.key_rows()]
    for store in stores:
        if store.backed_up_keys() != rows:
            store.back_up_keys(rows)
    return len(rows)


def bring_back(keys: KeyRows, rows: Iterable[dict[str, Any]]) -> int:
    """Merges the key rows a backup kept into the primary (a key the primary holds is kept, a
    revocation is never undone). Returns how many keys the backup held."""
    merged: dict[str, dict[str, Any]] = {}
    for row in rows:
        key_id = row.get("id")
        if not isinstance(key_id, str) or not isinstance(row.get("secret_hash"), str):
            log.warning("restore: a kept key row without an id or a hash, skipped")
            continue
        kept = merged.setdefault(key_id, {name: row.get(name) for name in FIELDS})
        kept["revoked_at"] = kept["revoked_at"] or row.get("revoked_at")
    keys.restore_key_rows(list(merged.values()))
    return len(merged)
