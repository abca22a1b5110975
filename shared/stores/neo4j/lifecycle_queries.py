"""Cypher of the memory API and a tenant's counts, as constants with parameters."""

from __future__ import annotations

from shared.stores.neo4j.filters import MEMORY_FILTER

# The memory lifecycle: every query is scoped to one tenant by $user_id and the search filters.
GET_MEMORY = """
MATCH (m:Memory {id: $id}) WHERE m.user_id = $user_id
RETURN m {.*, embedding: null} AS memory
"""

LIST_MEMORIES = f"""
MATCH (m:Memory) WHERE {MEMORY_FILTER} AND ($after IS NULL OR m.id > $after)
WITH m ORDER BY m.id LIMIT $limit
RETURN m {{.*, embedding: null}} AS memory
"""

# Deletes the tenant's Memories matching the filters (and, if given, these ids) that are not
# newer than $version; a document left without Memories goes too, leaving its DeletedDocument.
DELETE_MEMORIES = f"""
MATCH (m:Memory) WHERE {MEMORY_FILTER} AND ($ids IS NULL OR m.id IN $ids)
SET m.last_write_at = $now
WITH m WHERE coalesce(m.version, 0) <= $version
OPTIONAL MATCH (doc:Document)-[:HAS_CHUNK]->(m)
MERGE (t:DeletedMemory {{id: m.id}})
SET t.user_id = m.user_id, t.embedding_model = m.embedding_model,
    t.embedding_dim = m.embedding_dim, t.deleted_at = $now, t.version = $version,
    t.retry_at = null, t.attempts = 0
WITH m, m.id AS id, doc
DETACH DELETE m
WITH collect(DISTINCT doc) AS docs, collect(id) AS removed
CALL (docs) {{
    UNWIND docs AS d
    WITH d WHERE NOT (d)-[:HAS_CHUNK]->()
    MERGE (g:DeletedDocument {{id: d.id}})
    SET g.version = $version, g.user_id = d.user_id, g.deleted_at = $now
    DETACH DELETE d
    RETURN count(*) AS emptied
}}
// A document that keeps some Memories is now at the delete's version: a write of it accepted
// before the delete, arriving after it, is stale and cannot bring the deleted ones back.
CALL (docs) {{
    UNWIND docs AS d
    WITH d WHERE d IS NOT NULL AND (d)-[:HAS_CHUNK]->() AND coalesce(d.version, 0) < $version
    SET d.version = $version
    RETURN count(*) AS touched
}}
RETURN removed, emptied
"""

TENANT_COUNTS = """
MATCH (m:Memory {user_id: $user_id})
RETURN count(DISTINCT m.document_id) AS documents, count(m) AS memories,
       sum(CASE m.vector_sync WHEN 'pending' THEN 1 ELSE 0 END) AS pending,
       sum(CASE m.vector_sync WHEN 'synced' THEN 1 ELSE 0 END) AS synced,
       sum(CASE m.vector_sync WHEN 'failed' THEN 1 ELSE 0 END) AS failed
"""

DOCUMENT_STATUS = """
MATCH (d:Document {id: $key})
OPTIONAL MATCH (d)-[:HAS_CHUNK]->(m:Memory)
RETURN d.ingested_at AS ingested_at, d.version AS version, count(m) AS chunks,
       sum(CASE m.vector_sync WHEN 'pending' THEN 1 ELSE 0 END) AS pending,
       sum(CASE m.vector_sync WHEN 'synced' THEN 1 ELSE 0 END) AS synced,
       sum(CASE m.vector_sync WHEN 'failed' THEN 1 ELSE 0 END) AS failed
"""

CHUNK_COUNT = """
UNWIND $keys AS key
MATCH (d:Document {id: key})
RETURN sum(d.chunk_count) AS chunks
"""

CHUNK_TEXTS = """
MATCH (m:Memory {user_id: $user_id})
RETURN m.content AS content
ORDER BY m.document_id, m.chunk_index
"""
