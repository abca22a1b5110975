"""API keys in Neo4j, beside the memories they guard: ``(:ApiKey {id, name, scope, tenant,
secret_hash, signing_secret, created_at, revoked_at})``. A revoked key is kept (``revoked_at``),
so ``engram keys list`` shows what was revoked and when."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from shared.auth import ApiKey
from shared.stores.neo4j import Neo4jStore

CONSTRAINT = "CREATE CONSTRAINT api_key_id IF NOT EXISTS FOR (k:ApiKey) REQUIRE k.id IS UNIQUE"

ADD = """
CREATE (k:ApiKey {id: $id, name: $name, scope: $scope, tenant: $tenant, secret_hash: $secret_hash,
                  signing_secret: $signing_secret, created_at: $created_at})
"""

FIELDS = """
k.id AS id, k.name AS name, k.scope AS scope, k.tenant AS tenant, k.secret_hash AS secret_hash,
k.signing_secret AS signing_secret, k.created_at AS created_at, k.revoked_at AS revoked_at
"""

GET = "MATCH (k:ApiKey {id: $id}) RETURN " + FIELDS

LIST = "MATCH (k:ApiKey) RETURN " + FIELDS + " ORDER BY k.created_at, k.id"

REVOKE = """
MATCH (k:ApiKey {id: $id})
SET k.revoked_at = coalesce(k.revoked_at, $at)
RETURN k.id AS id
"""


class Neo4jKeyStore:
    def __init__(self, store: Neo4jStore) -> None:
        self._store = store
        self._schema_ready = False

    def add_key(self, key: ApiKey) -> None:
        if not self._schema_ready:
            self._store.write_rows(CONSTRAINT)
            self._schema_ready = True
        self._store.write_rows(ADD, **key.model_dump(exclude={"revoked_at"}))

    def get_key(self, key_id: str) -> ApiKey | None:
        rows = self._store.read_rows(GET, id=key_id)
        return _key(rows[0]) if rows else None

    def list_keys(self) -> list[ApiKey]:
        return [_key(row) for row in self._store.read_rows(LIST)]

    def revoke_key(self, key_id: str, at: datetime) -> bool:
        return bool(self._store.write_rows(REVOKE, id=key_id, at=at))


def _key(row: dict[str, Any]) -> ApiKey:
    return ApiKey.model_validate(row)
