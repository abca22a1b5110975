"""Cypher of a model migration (``engram reembed``), as constants with parameters.

The next vector lives beside the current one on each Memory (``embedding_next`` with its model,
dimension, the Memory version it was computed from, and whether the target's Qdrant collection
has it): progress is on the nodes, so a migration resumes wherever it stopped, and a Memory
rewritten since its next vector was made is simply not done any more.
"""

from __future__ import annotations

from shared.stores.neo4j.schema_queries import VECTOR_INDEX

MIGRATION = """
MATCH (g:EngramSchema {id: 'migration'})
RETURN g {.*} AS migration
"""

# The store's claim and the migration, read together: the model check of writers and searches.
MODEL_STATE = """
OPTIONAL MATCH (s:EngramSchema {id: 'embedding'})
OPTIONAL MATCH (g:EngramSchema {id: 'migration'})
RETURN s.embedding_model AS model, s.embedding_dim AS dimension, g.state AS state,
       g.source_model AS source_model, g.source_dim AS source_dim,
       g.target_model AS target_model, g.target_dim AS target_dim
"""

NEW_MIGRATION = """
MERGE (g:EngramSchema {id: 'migration'})
SET g += $target, g.source_model = $source_model, g.source_dim = $source_dim,
    g.state = 'running', g.run = 1, g.started_at = $now, g.switched_at = null,
    g.pages = 0, g.reembedded = 0, g.run_pages = 0, g.run_reembedded = 0, g.old_dropped_at = null
WITH g
MERGE (e:EmbeddingModel {name: $target.target_model, dimension: $target.target_dim})
ON CREATE SET e.created_at = $now
"""

NEXT_RUN = """
MATCH (g:EngramSchema {id: 'migration'})
SET g.run = g.run + 1, g.run_pages = 0, g.run_reembedded = 0
"""

# Done: a current next vector the target collection has, or already switched to the target.
_DONE = """(coalesce(m.embedding_next_model = $model AND m.embedding_next_dim = $dimension
          AND m.embedding_next_version = coalesce(m.version, 0) AND m.embedding_next_synced, false)
     OR coalesce(m.embedding_model = $model AND m.embedding_dim = $dimension
          AND m.embedding_next IS NULL, false))"""

PENDING = f"""
MATCH (m:Memory) WHERE ($after IS NULL OR m.id > $after) AND NOT {_DONE}
WITH m ORDER BY m.id LIMIT $limit
RETURN m.id AS id
"""

PROGRESS = f"""
MATCH (m:Memory)
RETURN count(m) AS total, sum(CASE WHEN {_DONE} THEN 1 ELSE 0 END) AS done
"""

ROWS = """
UNWIND $ids AS id
MATCH (m:Memory {id: id})
RETURN m {.*, embedding: null, embedding_next: null, version: coalesce(m.version, 0)} AS memory,
       m.embedding_next AS next_vector
"""

PUT_NEXT = """
UNWIND $rows AS row
MATCH (m:Memory {id: row.id})
WHERE coalesce(m.version, 0) = row.version
SET m.embedding_next = row.embedding, m.embedding_next_model = $model,
    m.embedding_next_dim = $dimension, m.embedding_next_version = row.version,
    m.embedding_next_synced = false
RETURN m.id AS id
"""

MARK_NEXT_SYNCED = """
UNWIND $rows AS row
MATCH (m:Memory {id: row.id})
WHERE m.embedding_next_version = row.version AND m.embedding_next_model = $model
  AND m.embedding_next_dim = $dimension
SET m.embedding_next_synced = true
"""

# Every page that re-embedded something counts; a page of an older run still in flight when a
# new run began counts only in the totals.
RECORD_PAGE = """
MATCH (g:EngramSchema {id: 'migration'})
WITH g, CASE WHEN g.run = $run THEN 1 ELSE 0 END AS this_run
SET g.pages = g.pages + 1, g.reembedded = g.reembedded + $reembedded,
    g.run_pages = g.run_pages + this_run, g.run_reembedded = g.run_reembedded + this_run * $reembedded
"""

SET_PHASE = """
MATCH (g:EngramSchema {id: 'migration'})
SET g.state = $phase, g.phase_at = $now
"""

# Copies current next vectors in; the Memory is synced if the target collection has it.
COPY_NEXT = """
MATCH (m:Memory)
WHERE m.embedding_next_model = $model AND m.embedding_next_dim = $dimension
  AND m.embedding_next_version = coalesce(m.version, 0)
WITH m LIMIT $limit
SET m.embedding = m.embedding_next, m.embedding_model = $model, m.embedding_dim = $dimension,
    m.vector_sync = CASE WHEN m.embedding_next_synced THEN 'synced' ELSE 'pending' END,
    m.vector_synced_at = CASE WHEN m.embedding_next_synced THEN $now ELSE null END,
    m.vector_sync_error = null, m.vector_sync_attempts = 0, m.vector_sync_retry_at = null
REMOVE m.embedding_next, m.embedding_next_model, m.embedding_next_dim, m.embedding_next_version,
       m.embedding_next_synced
RETURN count(m) AS copied
"""

NOT_SWITCHED = """
MATCH (m:Memory)
WHERE m.embedding_model <> $model OR m.embedding_dim <> $dimension
RETURN count(m) AS n
"""

FINISH_SWITCH = """
MATCH (s:EngramSchema {id: 'embedding'}), (g:EngramSchema {id: 'migration'})
SET s.embedding_model = $model, s.embedding_dim = $dimension, s.switched_at = $now,
    g.state = 'done', g.switched_at = $now
WITH g
MERGE (e:EmbeddingModel {name: $model, dimension: $dimension})
ON CREATE SET e.created_at = $now
REMOVE e.retired_at
WITH g
OPTIONAL MATCH (old:EmbeddingModel {name: g.source_model, dimension: g.source_dim})
SET old.retired_at = $now
"""

# The old collection is gone: tombstones still naming the old model point at the new one (its
# collection may hold their point), and the reconciler no longer scans the old one.
FORGET_SOURCE_MODEL = """
MATCH (g:EngramSchema {id: 'migration'}) WHERE g.state = 'done'
SET g.old_dropped_at = $now
WITH g
OPTIONAL MATCH (old:EmbeddingModel {name: g.source_model, dimension: g.source_dim})
DETACH DELETE old
WITH g
CALL (g) {
    MATCH (t:DeletedMemory) WHERE t.embedding_model = g.source_model AND t.embedding_dim = g.source_dim
    SET t.embedding_model = g.target_model, t.embedding_dim = g.target_dim
    RETURN count(t) AS moved
}
RETURN moved
"""

DROP_VECTOR_INDEX = f"DROP INDEX {VECTOR_INDEX} IF EXISTS"
