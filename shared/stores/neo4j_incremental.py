"""What incremental ingestion reads of the stored documents, over the store's connection.

A producer asks which documents are stored exactly as given (so it skips them), the embed stage
which chunks' vectors it can reuse, ``engram ingest --sync`` which documents a folder put there.
Every read names documents by their key, a uuid5 of tenant and id, or by the tenant itself: one
tenant's reads never meet another's documents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from shared.stores.neo4j import Neo4jStore

# Each document's version, the fingerprint of the fields it was written from, and whether all
# its chunks are still there (a delete of one memory leaves the document, a chunk short).
STORED_STATE = """
UNWIND $keys AS key
MATCH (d:Document {id: key})
OPTIONAL MATCH (d)-[:HAS_CHUNK]->(m:Memory)
WITH key, d, count(m) AS chunks, collect(DISTINCT m.embedding_model) AS models
RETURN key, coalesce(d.version, 0) AS version, d.fingerprint AS fingerprint, models,
       chunks = d.chunk_count AS whole
"""

STORED_VECTORS = """
UNWIND $wanted AS w
MATCH (:Document {id: w.key})-[:HAS_CHUNK]->(m:Memory)
WHERE m.content_hash IN w.hashes AND m.embedding_model = $model AND m.embedding IS NOT NULL
RETURN w.key AS key, m.content_hash AS hash, m.embedding AS embedding
"""

SOURCE_DOCUMENTS = """
MATCH (d:Document) WHERE d.user_id = $user_id AND d.source = $source
RETURN d.external_id AS id ORDER BY id
"""


@dataclass(frozen=True, slots=True)
class StoredState:
    version: int
    fingerprint: str | None
    models: tuple[str, ...]
    whole: bool


class Neo4jIncremental:
    def __init__(self, store: Neo4jStore) -> None:
        self._store = store

    def stored_states(self, keys: Sequence[str]) -> dict[str, StoredState]:
        rows = self._store.read_rows(STORED_STATE, keys=list(keys))
        return {
            row["key"]: StoredState(
                version=int(row["version"]),
                fingerprint=row["fingerprint"],
                models=tuple(m for m in row["models"] if m is not None),
                whole=bool(row["whole"]),
            )
            for row in rows
        }

    def stored_vectors(
        self, wanted: Mapping[str, set[str]], model: str
    ) -> dict[tuple[str, str], list[float]]:
        params = [{"key": key, "hashes": sorted(hashes)} for key, hashes in wanted.items() if hashes]
        if not params:
            return {}
        rows = self._store.read_rows(STORED_VECTORS, wanted=params, model=model)
        return {(row["key"], row["hash"]): list(row["embedding"]) for row in rows}

    def source_documents(self, user_id: str, source: str) -> list[str]:
        """The ids of the tenant's documents recorded as coming from ``source``."""
        return [row["id"] for row in self._store.read_rows(SOURCE_DOCUMENTS, user_id=user_id, source=source)]
