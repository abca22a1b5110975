"""Cypher of the Neo4j store, as constants with parameters.

Nothing here is built from caller input; the one interpolated value (the vector dimension in the
index options, which Cypher does not take as a parameter) is an int checked by the caller.
"""

from __future__ import annotations

VECTOR_INDEX = "memory_embedding"

SCHEMA_STATEMENTS = (
    "CREATE CONSTRAINT memory_id IF NOT EXISTS FOR (m:Memory) REQUIRE m.id IS UNIQUE",
    "CREATE CONSTRAINT document_id IF NOT EXISTS FOR (d:Document) REQUIRE d.id IS UNIQUE",
    "CREATE CONSTRAINT deleted_memory_id IF NOT EXISTS FOR (t:DeletedMemory) REQUIRE t.id IS UNIQUE",
    "CREATE CONSTRAINT engram_schema_id IF NOT EXISTS FOR (s:EngramSchema) REQUIRE s.id IS UNIQUE",
    "CREATE CONSTRAINT deleted_document_id IF NOT EXISTS FOR (g:DeletedDocument) REQUIRE g.id IS UNIQUE",
    "CREATE CONSTRAINT api_key_id IF NOT EXISTS FOR (k:ApiKey) REQUIRE k.id IS UNIQUE",
    "CREATE INDEX memory_user_id IF NOT EXISTS FOR (m:Memory) ON (m.user_id)",
    "CREATE INDEX memory_project_id IF NOT EXISTS FOR (m:Memory) ON (m.project_id)",
    "CREATE INDEX memory_session_id IF NOT EXISTS FOR (m:Memory) ON (m.session_id)",
    "CREATE INDEX memory_memory_type IF NOT EXISTS FOR (m:Memory) ON (m.memory_type)",
    "CREATE INDEX memory_document_id IF NOT EXISTS FOR (m:Memory) ON (m.document_id)",
    "CREATE INDEX memory_created_at IF NOT EXISTS FOR (m:Memory) ON (m.created_at)",
    "CREATE INDEX memory_status IF NOT EXISTS FOR (m:Memory) ON (m.status)",
    "CREATE INDEX memory_vector_sync IF NOT EXISTS FOR (m:Memory) ON (m.vector_sync)",
    "CREATE INDEX memory_content_hash IF NOT EXISTS FOR (m:Memory) ON (m.content_hash)",
    "CREATE INDEX memory_updated_at IF NOT EXISTS FOR (m:Memory) ON (m.updated_at)",
    "CREATE INDEX deleted_memory_deleted_at IF NOT EXISTS FOR (t:DeletedMemory) ON (t.deleted_at)",
    "CREATE INDEX document_user_id IF NOT EXISTS FOR (d:Document) ON (d.user_id)",
)

# Twin claim nodes (one id, two nodes) a store without the constraint let two processes make:
# the newest is kept. With the constraint made, there can be none.
FOLD_TWIN_CLAIMS = """
MATCH (s:EngramSchema)
WITH s ORDER BY coalesce(s.updated_at, s.adopted_at, s.primary_checked_at, s.finished_at, s.created_at,
                  datetime('0001-01-01T00:00:00Z')) DESC
WITH s.id AS id, collect(s) AS claims
WHERE size(claims) > 1
UNWIND tail(claims) AS twin
DETACH DELETE twin
"""

CREATE_VECTOR_INDEX = (
    f"CREATE VECTOR INDEX {VECTOR_INDEX} IF NOT EXISTS FOR (m:Memory) ON m.embedding "
    "OPTIONS {{indexConfig: {{`vector.dimensions`: {dimension}, "
    "`vector.similarity_function`: 'cosine'}}}}"
)

SHOW_VECTOR_INDEX = (
    "SHOW INDEXES YIELD name, options WHERE name = $name "
    "RETURN options.indexConfig['vector.dimensions'] AS dimension"
)

AWAIT_INDEXES = "CALL db.awaitIndexes($timeout_s)"

# What the database holds of the schema: a wiped or replaced database holds none of it.
SHOW_CONSTRAINT_NAMES = "SHOW CONSTRAINTS YIELD name RETURN name"
SHOW_INDEX_NAMES = "SHOW INDEXES YIELD name, state WHERE state = 'ONLINE' RETURN name"
STORE_ID = "OPTIONAL MATCH (s:EngramSchema {id: 'identity'}) RETURN s.store_id AS store_id"

# The model whose vectors the store holds: set by the first writer, checked by every later one.
CLAIM_EMBEDDING_MODEL = """
MERGE (s:EngramSchema {id: 'embedding'})
ON CREATE SET s.embedding_model = $model, s.embedding_dim = $dimension, s.created_at = datetime()
RETURN s.embedding_model AS model, s.embedding_dim AS dimension
"""

# Writes are guarded by the version the producer fixed. Each guarded statement first takes the
# node's write lock (a harmless SET) and only then reads its version, so two writers of one
# document serialise and the older one always sees the newer one's commit.

# The documents of a batch that are not older than what the store holds (nor than a delete).
UPSERT_DOCUMENTS = """
UNWIND $documents AS d
OPTIONAL MATCH (gone:DeletedDocument {id: d.key})
WITH d, gone WHERE gone IS NULL OR gone.version < d.version
MERGE (doc:Document {id: d.key})
ON CREATE SET doc.created_at = d.created_at
SET doc.last_write_at = $now
WITH d, doc, gone WHERE coalesce(doc.version, 0) <= d.version
SET doc.external_id = d.external_id, doc.user_id = d.user_id, doc.project_id = d.project_id,
    doc.session_id = d.session_id, doc.source = d.source, doc.title = d.title, doc.uri = d.uri,
    doc.content_hash = d.content_hash, doc.metadata = d.metadata, doc.chunk_count = d.chunk_count,
    doc.fingerprint = d.fingerprint,
    doc.created_at = coalesce(d.given_created_at, doc.created_at), doc.ingested_at = $now,
    doc.version = d.version
FOREACH (tombstone IN CASE WHEN gone IS NULL THEN [] ELSE [gone] END | DELETE tombstone)
RETURN d.key AS key
"""

UPSERT_MEMORIES = """
UNWIND $memories AS row
MATCH (doc:Document {id: row.document_key})
WHERE doc.version = row.version AND doc.id IN $accepted
MERGE (m:Memory {id: row.id})
ON CREATE SET m.created_at = row.created_at
SET m.created_at = coalesce(row.given_created_at, m.created_at),
    m += row.properties, m.embedding = row.embedding, m.updated_at = $now,
    m.vector_sync = 'pending', m.vector_sync_error = null, m.vector_sync_attempts = 0,
    m.vector_sync_retry_at = null, m.vector_synced_at = null
MERGE (doc)-[:HAS_CHUNK]->(m)
WITH m
OPTIONAL MATCH (t:DeletedMemory {id: m.id})
DELETE t
RETURN m.id AS id
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

# What Neo4j holds now for each id: the sync reads this back rather than trusting a task's copy.
SYNC_ROWS = """
UNWIND $ids AS id
OPTIONAL MATCH (m:Memory {id: id})
OPTIONAL MATCH (d:Document)-[:HAS_CHUNK]->(m)
OPTIONAL MATCH (t:DeletedMemory {id: id})
RETURN id, m {.*, version: coalesce(m.version, 0)} AS memory,
       d {.external_id, .source, .uri, .metadata, .content_hash, .chunk_count, .ingested_at,
          .created_at, .fingerprint} AS document,
       t {.id, .embedding_model, .embedding_dim, version: coalesce(t.version, 0)} AS tombstone
"""

MARK_SYNCED = """
UNWIND $rows AS row
MATCH (m:Memory {id: row.id})
SET m.vector_sync_checked_at = $now
WITH m, row WHERE coalesce(m.version, 0) = row.version
SET m.vector_sync = 'synced', m.vector_synced_at = $now, m.vector_sync_error = null,
    m.vector_sync_retry_at = null
RETURN m.id AS id
"""

# The next try waits base * 2^attempts seconds, at most cap: a row that keeps failing moves to
# the back of the backlog instead of blocking its head.
MARK_FAILED = """
UNWIND $rows AS row
MATCH (m:Memory {id: row.id})
SET m.vector_sync_checked_at = $now
WITH m, row WHERE coalesce(m.version, 0) = row.version
WITH m, coalesce(m.vector_sync_attempts, 0) + 1 AS attempts
SET m.vector_sync = 'failed', m.vector_sync_error = $error, m.vector_sync_attempts = attempts,
    m.vector_sync_retry_at = $now + duration({seconds: CASE
        WHEN $base_s * 2.0 ^ attempts > $cap_s THEN $cap_s ELSE toInteger($base_s * 2.0 ^ attempts) END})
RETURN count(m) AS marked
"""

MARK_TOMBSTONES_FAILED = """
UNWIND $rows AS row
MATCH (t:DeletedMemory {id: row.id})
WHERE coalesce(t.version, 0) = row.version
WITH t, coalesce(t.attempts, 0) + 1 AS attempts
SET t.attempts = attempts, t.error = $error,
    t.retry_at = $now + duration({seconds: CASE
        WHEN $base_s * 2.0 ^ attempts > $cap_s THEN $cap_s ELSE toInteger($base_s * 2.0 ^ attempts) END})
RETURN count(t) AS marked
"""

FORGET_TOMBSTONES = """
UNWIND $rows AS row
MATCH (t:DeletedMemory {id: row.id})
WHERE coalesce(t.version, 0) = row.version
DELETE t
"""

SYNC_BACKLOG = """
CALL () {
    MATCH (m:Memory) WHERE m.vector_sync = 'pending' AND m.updated_at < $pending_before
    RETURN m.id AS id, m.updated_at AS due
    UNION ALL
    MATCH (m:Memory) WHERE m.vector_sync = 'failed'
      AND coalesce(m.vector_sync_retry_at, m.updated_at) <= $now
    RETURN m.id AS id, coalesce(m.vector_sync_retry_at, m.updated_at) AS due
    UNION ALL
    MATCH (t:DeletedMemory)
    WHERE t.deleted_at < $pending_before AND coalesce(t.retry_at, t.deleted_at) <= $now
    RETURN t.id AS id, coalesce(t.retry_at, t.deleted_at) AS due
}
RETURN id ORDER BY due, id LIMIT $limit
"""

BACKLOG_SIZE = """
CALL () {
    MATCH (m:Memory) WHERE m.vector_sync = 'pending' AND m.updated_at < $pending_before
    RETURN count(m) AS n
    UNION ALL
    MATCH (m:Memory) WHERE m.vector_sync = 'failed'
      AND coalesce(m.vector_sync_retry_at, m.updated_at) <= $now
    RETURN count(m) AS n
    UNION ALL
    MATCH (t:DeletedMemory)
    WHERE t.deleted_at < $pending_before AND coalesce(t.retry_at, t.deleted_at) <= $now
    RETURN count(t) AS n
}
RETURN sum(n) AS n
"""

# The drift scan's reads. A page is a range seek on the memory_id constraint's index, read in its
# order, so it costs its own rows (``$after IS NULL OR m.id > $after`` scanned and sorted every
# Memory for every page); the first page is asked with $after = '', below every id. Each returns
# its rows as one list in one record: the driver's cost per record was most of a page's time (1,000
# rows: 129 ms as records with a datetime, 14 ms as one list).
MEMORY_STATES = """
MATCH (m:Memory) WHERE m.id > $after
WITH m ORDER BY m.id LIMIT $limit
RETURN collect([m.id, m.version, m.content_hash, m.embedding_model, m.embedding_dim, m.vector_sync]) AS rows
"""

LIVE_VERSIONS = """
UNWIND $ids AS id
MATCH (m:Memory {id: id})
RETURN collect([id, coalesce(m.version, 0)]) AS rows
"""

TOMBSTONED = """
UNWIND $ids AS id
MATCH (t:DeletedMemory {id: id})
RETURN id
"""

REGISTER_MODEL = """
MERGE (e:EmbeddingModel {name: $model, dimension: $dimension})
ON CREATE SET e.created_at = datetime()
"""

MODELS = """
MATCH (e:EmbeddingModel) RETURN e.name AS model, e.dimension AS dimension
UNION
MATCH (s:EngramSchema {id: 'embedding'}) RETURN s.embedding_model AS model, s.embedding_dim AS dimension
"""

SYNC_HEALTH = """
CALL () { MATCH (t:DeletedMemory) RETURN count(t) AS tombstones }
CALL () { MATCH (m:Memory) WHERE m.vector_sync = 'pending' RETURN min(m.updated_at) AS oldest_pending }
CALL () {
    MATCH (m:Memory) WHERE m.vector_sync = 'failed' AND coalesce(m.vector_sync_retry_at, m.updated_at) <= $now
    RETURN count(m) AS retry_due
}
RETURN tombstones, oldest_pending, retry_due
"""

RECORD_RECONCILE = """
MERGE (s:EngramSchema {id: 'reconcile'})
SET s.report = $report, s.finished_at = $at
"""

LAST_RECONCILE = """
MATCH (s:EngramSchema {id: 'reconcile'})
RETURN s.report AS report, s.finished_at AS finished_at
"""

SWEEP_CURSOR = """
MATCH (s:EngramSchema {id: 'reconcile_sweep'})
RETURN s.cursor AS cursor
"""

SAVE_SWEEP_CURSOR = """
MERGE (s:EngramSchema {id: 'reconcile_sweep'})
SET s.cursor = $cursor, s.updated_at = $at
"""

VECTOR_SYNC_COUNTS = """
MATCH (m:Memory)
RETURN m.vector_sync AS state, count(*) AS n
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

# Search. Filters are fixed clauses over parameters; absent ones are switched off by a null.
MEMORY_FILTER = """
m.user_id = $user_id
AND ($project_id IS NULL OR m.project_id = $project_id)
AND ($session_id IS NULL OR m.session_id = $session_id)
AND ($document_id IS NULL OR m.document_id = $document_id)
AND ($memory_types IS NULL OR m.memory_type IN $memory_types)
AND ($tags IS NULL OR any(tag IN m.tags WHERE tag IN $tags))
AND ($from_date IS NULL OR m.created_at >= $from_date)
AND ($to_date IS NULL OR m.created_at <= $to_date)
AND ($statuses IS NULL OR coalesce(m.status, 'active') IN $statuses)
"""

STORED_MODEL = """
MATCH (s:EngramSchema {id: 'embedding'})
RETURN s.embedding_model AS model, s.embedding_dim AS dimension
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
