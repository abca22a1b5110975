"""Cypher of writes and deletes of documents, as constants with parameters.

Writes are guarded by the version the producer fixed. Each guarded statement first takes the
node's write lock (a harmless SET) and only then reads its version, so two writers of one
document serialise and the older one always sees the newer one's commit.
"""

from __future__ import annotations

# The documents of a batch that are not older than what the store holds (nor than a delete).
UPSERT_DOCUMENTS = """
UNWIND $documents AS d
OPTIONAL MATCH (gone:DeletedDocument {id: d.key})
WITH d, gone WHERE gone IS NULL OR gone.version < d.version
MERGE (doc:Document {id: d.key})
// Version -1 until the SET below: made by this MERGE, so it holds no chunk the write could find
// stale (a document written before, even by a version that kept none, never has -1).
ON CREATE SET doc.created_at = d.created_at, doc.version = -1
SET doc.last_write_at = $now
WITH d, doc, gone WHERE coalesce(doc.version, 0) <= d.version
WITH d, doc, gone, doc.version = -1 AS fresh
SET doc.external_id = d.external_id, doc.user_id = d.user_id, doc.project_id = d.project_id,
    doc.session_id = d.session_id, doc.source = d.source, doc.title = d.title, doc.uri = d.uri,
    doc.content_hash = d.content_hash, doc.metadata = d.metadata, doc.chunk_count = d.chunk_count,
    doc.fingerprint = d.fingerprint,
    doc.created_at = coalesce(d.given_created_at, doc.created_at), doc.ingested_at = $now,
    doc.version = d.version
FOREACH (tombstone IN CASE WHEN gone IS NULL THEN [] ELSE [gone] END | DELETE tombstone)
RETURN d.key AS key, fresh
"""

UPSERT_MEMORIES = """
UNWIND $memories AS row
MATCH (doc:Document {id: row.document_key})
WHERE doc.version = row.version AND doc.id IN $accepted
// A Memory not stored before names no entity and is in no session yet: the graph's steps that
// undo those are not asked for it.
OPTIONAL MATCH (before:Memory {id: row.id})
WITH row, doc, before IS NULL AS fresh
MERGE (m:Memory {id: row.id})
ON CREATE SET m.created_at = row.created_at
SET m.created_at = coalesce(row.given_created_at, m.created_at),
    m += row.properties, m.embedding = row.embedding, m.updated_at = $now,
    m.vector_sync = 'pending', m.vector_sync_error = null, m.vector_sync_attempts = 0,
    m.vector_sync_retry_at = null, m.vector_synced_at = null
MERGE (doc)-[:HAS_CHUNK]->(m)
WITH m, fresh
OPTIONAL MATCH (t:DeletedMemory {id: m.id})
DELETE t
RETURN m.id AS id, fresh
"""

LINK_NEXT = """
UNWIND $pairs AS pair
MATCH (a:Memory {id: pair[0]})
MATCH (b:Memory {id: pair[1]})
MERGE (a)-[:NEXT]->(b)
"""

# Chunks a document no longer has are older than its new version; their tombstones carry the
# version that removed them, so Qdrant's copy goes too but a newer point never does.
REMOVE_STALE_CHUNKS = """
UNWIND $documents AS d
MATCH (:Document {id: d.key})-[:HAS_CHUNK]->(old:Memory)
WHERE coalesce(old.version, 0) < d.version
MERGE (t:DeletedMemory {id: old.id})
SET t.user_id = old.user_id, t.embedding_model = old.embedding_model,
    t.embedding_dim = old.embedding_dim, t.deleted_at = $now, t.version = d.version,
    t.retry_at = null, t.attempts = 0
WITH old, old.id AS id
DETACH DELETE old
RETURN id
"""

# A delete is a write like any other: it wins over older versions and loses to newer ones, and
# leaves a DeletedDocument behind — even for a document not stored yet, whose write is still on
# its way — so an older write arriving later cannot bring it back.
DELETE_DOCUMENTS = """
UNWIND $keys AS key
MERGE (gone:DeletedDocument {id: key})
ON CREATE SET gone.version = $version, gone.deleted_at = $now
SET gone.version = CASE WHEN gone.version < $version THEN $version ELSE gone.version END
WITH key
OPTIONAL MATCH (doc:Document {id: key})
SET doc.last_write_at = $now
WITH doc WHERE doc IS NOT NULL AND coalesce(doc.version, 0) <= $version
OPTIONAL MATCH (doc)-[:HAS_CHUNK]->(m:Memory)
WITH doc, collect(m) AS memories
CALL (memories) {
    UNWIND memories AS old
    MERGE (t:DeletedMemory {id: old.id})
    SET t.user_id = old.user_id, t.embedding_model = old.embedding_model,
        t.embedding_dim = old.embedding_dim, t.deleted_at = $now, t.version = $version,
        t.retry_at = null, t.attempts = 0
    WITH old, old.id AS id
    DETACH DELETE old
    RETURN collect(id) AS removed
}
DETACH DELETE doc
RETURN removed
"""
