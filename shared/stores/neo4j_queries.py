"""Cypher of the Neo4j store, as constants with parameters.

Nothing here is built from caller input; the one interpolated value (the vector dimension in the
index options, which Cypher does not take as a parameter) is an int checked by the caller.
"""

from __future__ import annotations

VECTOR_INDEX = "memory_embedding"
FULLTEXT_INDEX = "memory_content"

SCHEMA_STATEMENTS = (
    "CREATE CONSTRAINT memory_id IF NOT EXISTS FOR (m:Memory) REQUIRE m.id IS UNIQUE",
    "CREATE CONSTRAINT document_id IF NOT EXISTS FOR (d:Document) REQUIRE d.id IS UNIQUE",
    "CREATE CONSTRAINT deleted_memory_id IF NOT EXISTS FOR (t:DeletedMemory) REQUIRE t.id IS UNIQUE",
    "CREATE CONSTRAINT engram_schema_id IF NOT EXISTS FOR (s:EngramSchema) REQUIRE s.id IS UNIQUE",
    "CREATE INDEX memory_user_id IF NOT EXISTS FOR (m:Memory) ON (m.user_id)",
    "CREATE INDEX memory_project_id IF NOT EXISTS FOR (m:Memory) ON (m.project_id)",
    "CREATE INDEX memory_session_id IF NOT EXISTS FOR (m:Memory) ON (m.session_id)",
    "CREATE INDEX memory_memory_type IF NOT EXISTS FOR (m:Memory) ON (m.memory_type)",
    "CREATE INDEX memory_document_id IF NOT EXISTS FOR (m:Memory) ON (m.document_id)",
    "CREATE INDEX memory_created_at IF NOT EXISTS FOR (m:Memory) ON (m.created_at)",
    "CREATE INDEX memory_vector_sync IF NOT EXISTS FOR (m:Memory) ON (m.vector_sync)",
    "CREATE INDEX memory_content_hash IF NOT EXISTS FOR (m:Memory) ON (m.content_hash)",
    "CREATE INDEX document_user_id IF NOT EXISTS FOR (d:Document) ON (d.user_id)",
    f"CREATE FULLTEXT INDEX {FULLTEXT_INDEX} IF NOT EXISTS FOR (m:Memory) ON EACH [m.content]",
)

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

# The model whose vectors the store holds: set by the first writer, checked by every later one.
CLAIM_EMBEDDING_MODEL = """
MERGE (s:EngramSchema {id: 'embedding'})
ON CREATE SET s.embedding_model = $model, s.embedding_dim = $dimension, s.created_at = datetime()
RETURN s.embedding_model AS model, s.embedding_dim AS dimension
"""

UPSERT_DOCUMENTS = """
UNWIND $documents AS d
MERGE (doc:Document {id: d.key})
ON CREATE SET doc.created_at = d.created_at
SET doc.created_at = coalesce(d.given_created_at, doc.created_at),
    doc.external_id = d.external_id, doc.user_id = d.user_id, doc.project_id = d.project_id,
    doc.session_id = d.session_id, doc.source = d.source, doc.title = d.title, doc.uri = d.uri,
    doc.content_hash = d.content_hash, doc.metadata = d.metadata, doc.chunk_count = d.chunk_count,
    doc.ingested_at = d.ingested_at
"""

UPSERT_MEMORIES = """
UNWIND $memories AS row
MATCH (doc:Document {id: row.document_key})
MERGE (m:Memory {id: row.id})
ON CREATE SET m.created_at = row.created_at
SET m.created_at = coalesce(row.given_created_at, m.created_at),
    m += row.properties, m.embedding = row.embedding, m.updated_at = row.updated_at,
    m.vector_sync = 'pending', m.vector_sync_error = null, m.vector_sync_attempts = 0,
    m.vector_synced_at = null
MERGE (doc)-[:HAS_CHUNK]->(m)
WITH m
OPTIONAL MATCH (t:DeletedMemory {id: m.id})
DELETE t
RETURN m.id AS id, m.created_at AS created_at, m.updated_at AS updated_at
"""

LINK_NEXT = """
UNWIND $pairs AS pair
MATCH (a:Memory {id: pair[0]}), (b:Memory {id: pair[1]})
MERGE (a)-[:NEXT]->(b)
"""

# Chunks past a document's new length are gone; the tombstone lets Qdrant's copy be deleted too.
REMOVE_STALE_CHUNKS = """
UNWIND $documents AS d
MATCH (:Document {id: d.key})-[:HAS_CHUNK]->(old:Memory)
WHERE old.chunk_index >= d.chunk_count
MERGE (t:DeletedMemory {id: old.id})
SET t.user_id = old.user_id, t.embedding_model = old.embedding_model, t.deleted_at = $now
WITH old, old.id AS id
DETACH DELETE old
RETURN id
"""

MARK_SYNCED = """
UNWIND $rows AS row
MATCH (m:Memory {id: row.id})
WHERE m.content_hash = row.content_hash AND m.embedding_model = row.embedding_model
SET m.vector_sync = 'synced', m.vector_synced_at = $now, m.vector_sync_error = null
RETURN count(m) AS marked
"""

MARK_FAILED = """
UNWIND $ids AS id
MATCH (m:Memory {id: id})
WHERE m.vector_sync <> 'synced'
SET m.vector_sync = 'failed', m.vector_sync_error = $error,
    m.vector_sync_attempts = coalesce(m.vector_sync_attempts, 0) + 1
RETURN count(m) AS marked
"""

FORGET_TOMBSTONES = """
UNWIND $ids AS id
MATCH (t:DeletedMemory {id: id})
DELETE t
"""

MEMORIES_TO_RESYNC = """
MATCH (m:Memory)
WHERE (m.vector_sync = 'pending' AND m.updated_at < $cutoff) OR m.vector_sync = 'failed'
RETURN m {.*} AS memory
ORDER BY m.updated_at
LIMIT $limit
"""

TOMBSTONES = """
MATCH (t:DeletedMemory)
RETURN t.id AS id
ORDER BY t.deleted_at
LIMIT $limit
"""

VECTOR_SYNC_COUNTS = """
MATCH (m:Memory)
RETURN m.vector_sync AS state, count(*) AS n
"""

DOCUMENT_STATUS = """
MATCH (d:Document {id: $key})
OPTIONAL MATCH (d)-[:HAS_CHUNK]->(m:Memory)
RETURN d.ingested_at AS ingested_at, count(m) AS chunks,
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
"""

MEMORY_FIELDS = """
m {.id, .content, .content_hash, .memory_type, .importance, .document_id, .chunk_index,
   .title, .session_id, .project_id, .tags, .created_at} AS memory
"""

# The index scores cosine as (1 + cos) / 2; the worker turns it back into cosine.
VECTOR_CANDIDATES = f"""
CALL db.index.vector.queryNodes('{VECTOR_INDEX}', $k, $vector) YIELD node AS m, score
WITH m, score WHERE {MEMORY_FILTER}
RETURN {MEMORY_FIELDS}, score
"""

EXACT_CANDIDATES = f"""
MATCH (m:Memory)
WHERE {MEMORY_FILTER} AND m.embedding IS NOT NULL
WITH m, vector.similarity.cosine(m.embedding, $vector) AS score
ORDER BY score DESC
LIMIT $k
RETURN {MEMORY_FIELDS}, score
"""

FULLTEXT_CANDIDATES = f"""
CALL db.index.fulltext.queryNodes('{FULLTEXT_INDEX}', $text, {{limit: $k}}) YIELD node AS m, score
WITH m, score WHERE {MEMORY_FILTER} AND m.embedding IS NOT NULL
RETURN {MEMORY_FIELDS}, score AS text_score,
       vector.similarity.cosine(m.embedding, $vector) AS score
"""

RESYNC_BACKLOG = """
MATCH (m:Memory)
WHERE (m.vector_sync = 'pending' AND m.updated_at < $cutoff) OR m.vector_sync = 'failed'
RETURN count(m) AS memories
"""

TOMBSTONE_COUNT = """
MATCH (t:DeletedMemory)
RETURN count(t) AS tombstones
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
