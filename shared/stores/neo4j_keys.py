"""API keys in Neo4j, beside the memories they guard: ``(:ApiKey {id, name, scope, tenant,
secret_hash, signing_secret, created_at, revoked_at})``. A revoked key is kept (``revoked_at``),
so ``engram keys list`` shows what was revoked and when."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from shared.auth import ApiKey
from shared.sealing import SecretBox
from shared.stores.neo4j import Neo4jStore
from shared.stores.neo4j.schema_queries import SCHEMA_STATEMENTS

CONSTRAINT = next(s for s in SCHEMA_STATEMENTS if " api_key_id " in s)

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

ROTATE_SIGNING = """
MATCH (k:ApiKey {id: $id}) WHERE k.revoked_at IS NULL
SET k.signing_secret = $signing_secret
RETURN k.id AS id
"""

REVOKE = """
MATCH (k:ApiKey {id: $id})
SET k.revoked_at = coalesce(k.revoked_at, $at)
RETURN k.id AS id
"""


class Neo4jKeyStore:
    """Signing secrets cross this boundary in clear and rest in Neo4j sealed (shared/sealing.py)."""

    def __init__(self, store: Neo4jStore, box: SecretBox) -> None:
        self._store = store
        self._box = box
        self._schema_ready = False

    def add_key(self, key: ApiKey) -> None:
        if not self._schema_ready:
            self._store.write_rows(CONSTRAINT)
            self._schema_ready = True
        row = key.model_dump(exclude={"revoked_at"})
        if key.signing_secret is not None:
            row["signing_secret"] = self._box.seal(key.signing_secret)
        self._store.write_rows(ADD, **row)

    def get_key(self, key_id: str) -> ApiKey | None:
        rows = self._store.read_rows(GET, id=key_id)
        return self._key(rows[0]) if rows else None

    def list_keys(self) -> list[ApiKey]:
        return [self._key(row) for row in self._store.read_rows(LIST)]

    def rotate_signing_secret(self, key_id: str, signing_secret: str) -> bool:
        """The live key's signing secret replaced (sealed); False if there is no such live key."""
        sealed = self._box.seal(signing_secret)
        return bool(self._store.write_rows(ROTATE_SIGNING, id=key_id, signing_secret=sealed))

    def _key(self, row: dict[str, Any]) -> ApiKey:
        if row.get("signing_secret") is not None:
            row = {**row, "signing_secret": self._box.open(row["signing_secret"])}
        return ApiKey.model_validate(row)

    def revoke_key(self, key_id: str, at: datetime) -> bool:
        return bool(self._store.write_rows(REVOKE, id=key_id, at=at))


# The keys as Neo4j holds them, for the backup (shared/services/key_backup.py): moments as text.
ROWS = """
MATCH (k:ApiKey)
RETURN k.id AS id, k.name AS name, k.scope AS scope, k.tenant AS tenant, k.secret_hash AS secret_hash,
       k.signing_secret AS signing_secret, toString(k.created_at) AS created_at,
       toString(k.revoked_at) AS revoked_at
ORDER BY id
"""

# A key the primary holds is kept as it is, but a revocation is never undone: a key revoked in
# either stays revoked.
RESTORE = """
UNWIND $rows AS r
MERGE (k:ApiKey {id: r.id})
ON CREATE SET k.name = r.name, k.scope = r.scope, k.tenant = r.tenant, k.secret_hash = r.secret_hash,
              k.signing_secret = r.signing_secret, k.created_at = datetime(r.created_at)
SET k.revoked_at = coalesce(k.revoked_at, CASE WHEN r.revoked_at IS NULL THEN null
                                               ELSE datetime(r.revoked_at) END)
RETURN count(k) AS n
"""


class Neo4jKeyRows:
    """The ``ApiKey`` nodes as rows, untouched (hashes, sealed secrets): no box needed."""

    def __init__(self, store: Neo4jStore) -> None:
        self._store = store

    def key_rows(self) -> list[dict[str, Any]]:
        return self._store.read_rows(ROWS)

    def restore_key_rows(self, rows: list[dict[str, Any]]) -> int:
        if not rows:
            return 0
        self._store.write_rows(CONSTRAINT)
        return int(self._store.write_rows(RESTORE, rows=rows)[0]["n"])
