"""Cypher of the store's schema, as constants with parameters: constraints and indexes, what the
database holds of them, and the model the store holds.

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

# ``{options}``: the settings' HNSW options (ints and a boolean, validated) as Cypher map entries,
# written into the statement: Neo4j takes no parameters in a schema command.
CREATE_VECTOR_INDEX = (
    f"CREATE VECTOR INDEX {VECTOR_INDEX} IF NOT EXISTS FOR (m:Memory) ON m.embedding "
    "OPTIONS {{indexConfig: {{`vector.dimensions`: {dimension}, "
    "`vector.similarity_function`: 'cosine', {options}}}}}"
)

# Neo4j 2026.02 and later: the tenant kept inside the index (``WITH``), so a search filtered by it
# walks only the tenant's neighbours (Cypher 25's ``SEARCH ... WHERE m.user_id = $user_id``).
CREATE_VECTOR_INDEX_WITH_TENANT = (
    f"CYPHER 25 CREATE VECTOR INDEX {VECTOR_INDEX} IF NOT EXISTS FOR (m:Memory) ON m.embedding "
    "WITH [m.user_id] OPTIONS {{indexConfig: {{`vector.dimensions`: {dimension}, "
    "`vector.similarity_function`: 'cosine', {options}}}}}"
)

SHOW_VECTOR_INDEX = (
    "SHOW INDEXES YIELD name, options, properties, state WHERE name = $name "
    "RETURN options.indexConfig['vector.dimensions'] AS dimension, options.indexConfig AS config, "
    "properties, state"
)

AWAIT_INDEXES = "CALL db.awaitIndexes($timeout_s)"
INDEXES_NOT_ONLINE = (
    "SHOW INDEXES YIELD name, state, populationPercent WHERE state <> 'ONLINE' "
    "RETURN name, state, populationPercent AS percent"
)

# What the database holds of the schema: a wiped or replaced database holds none of it.
SHOW_CONSTRAINT_NAMES = "SHOW CONSTRAINTS YIELD name RETURN name"

SHOW_INDEX_NAMES = "SHOW INDEXES YIELD name, state WHERE state = 'ONLINE' RETURN name"

# Indexes there or being built: one being built is not made again (schema.py's check).
SHOW_INDEX_NAMES_MADE = "SHOW INDEXES YIELD name, state WHERE state IN ['ONLINE', 'POPULATING'] RETURN name"

STORE_ID = "OPTIONAL MATCH (s:EngramSchema {id: 'identity'}) RETURN s.store_id AS store_id"

# The model whose vectors the store holds: set by the first writer, checked by every later one.
CLAIM_EMBEDDING_MODEL = """
MERGE (s:EngramSchema {id: 'embedding'})
ON CREATE SET s.embedding_model = $model, s.embedding_dim = $dimension, s.created_at = datetime()
RETURN s.embedding_model AS model, s.embedding_dim AS dimension
"""

REGISTER_MODEL = """
MERGE (e:EmbeddingModel {name: $model, dimension: $dimension})
ON CREATE SET e.created_at = datetime()
"""

STORED_MODEL = """
MATCH (s:EngramSchema {id: 'embedding'})
RETURN s.embedding_model AS model, s.embedding_dim AS dimension
"""
