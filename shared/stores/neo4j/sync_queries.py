"""Cypher of the Qdrant sync's side and the reconciler's reads, as constants with parameters."""

from __future__ import annotations

# What Neo4j holds now for each id: the sync reads this back rather than trusting a task's copy.
# A Memory's own fields (Memory's, and its vector) rather than all its properties, and its
# datetimes as epoch microseconds: the driver's DateTime hydration cost a tenth of a millisecond
# each, about half of what this read cost the process reading it (measured at 100k: 240 of 265
# ms a batch of 256 in Python, four datetimes of the Memory and two of its document).
SYNC_ROWS = """
UNWIND $ids AS id
OPTIONAL MATCH (m:Memory {id: id})
OPTIONAL MATCH (d:Document)-[:HAS_CHUNK]->(m)
OPTIONAL MATCH (t:DeletedMemory {id: id})
RETURN id,
       m {.id, .document_key, .document_id, .user_id, .chunk_index, .content, .key, .content_hash,
          .token_count, .memory_type, .project_id, .session_id, .position, .title, .tags,
          .importance, .confidence, .status, .embedding_model, .embedding_dim, .embedding,
          version: coalesce(m.version, 0),
          created_at_us: m.created_at.epochSeconds * 1000000 + m.created_at.microsecond,
          updated_at_us: m.updated_at.epochSeconds * 1000000 + m.updated_at.microsecond} AS memory,
       d {.external_id, .source, .uri, .metadata, .content_hash, .chunk_count, .fingerprint,
          ingested_at_us: d.ingested_at.epochSeconds * 1000000 + d.ingested_at.microsecond,
          created_at_us: d.created_at.epochSeconds * 1000000 + d.created_at.microsecond} AS document,
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
