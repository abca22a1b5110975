"""Cypher of the store's identity, and of a restore's checkpoint (shared/services/restore.py).

A store id is made once, at bootstrap, by the first process that makes the schema: a wiped or new
Neo4j makes another one, which is how the reconciler tells it from the primary Qdrant was synced
with. A restore adopts the id recorded in the backup it rebuilt the store from.
"""

from __future__ import annotations

ENSURE_IDENTITY = """
MERGE (s:EngramSchema {id: 'identity'})
ON CREATE SET s.store_id = randomUUID(), s.created_at = datetime()
RETURN s.store_id AS store_id
"""

IDENTITY = """
MATCH (s:EngramSchema {id: 'identity'})
RETURN s.store_id AS store_id, s.primary_lost AS primary_lost, s.primary_checked_at AS checked_at,
       s.qdrant_points AS qdrant_points
"""

ADOPT_IDENTITY = """
MERGE (s:EngramSchema {id: 'identity'})
ON CREATE SET s.created_at = datetime()
SET s.store_id = $store_id, s.adopted_at = $now, s.primary_lost = null
"""

RECORD_PRIMARY = """
MERGE (s:EngramSchema {id: 'identity'})
ON CREATE SET s.store_id = randomUUID(), s.created_at = datetime()
SET s.primary_lost = $reason, s.primary_checked_at = $now, s.qdrant_points = $points
"""

MEMORY_COUNT = "MATCH (m:Memory) RETURN count(m) AS n"

RESTORE_STATE = """
MATCH (s:EngramSchema {id: $name})
RETURN s.state AS state, s.cursor AS cursor, s.tenant AS tenant, s.report AS report,
       s.total AS total, s.done AS done, s.started_at AS started_at, s.updated_at AS updated_at
"""

SAVE_RESTORE_STATE = """
MERGE (s:EngramSchema {id: $name})
SET s.state = $state, s.cursor = $cursor, s.tenant = $tenant, s.report = $report,
    s.total = $total, s.done = $done, s.started_at = coalesce($started_at, s.started_at),
    s.updated_at = $now
"""

# What a write cannot set from a document alone: the moments the backup recorded.
RESTORE_MOMENTS = """
UNWIND $rows AS row
MATCH (d:Document {id: row.key})
WHERE d.version = row.version
SET d.ingested_at = CASE WHEN row.ingested_at IS NULL THEN d.ingested_at ELSE datetime(row.ingested_at) END,
    d.fingerprint = coalesce(row.fingerprint, d.fingerprint)
WITH d, row
UNWIND row.memories AS memory
MATCH (d)-[:HAS_CHUNK]->(m:Memory {id: memory.id})
WHERE m.version = row.version
SET m.updated_at = CASE WHEN memory.updated_at IS NULL THEN m.updated_at ELSE datetime(memory.updated_at) END,
    m.created_at = CASE WHEN memory.created_at IS NULL THEN m.created_at ELSE datetime(memory.created_at) END,
    m.status = coalesce(memory.status, m.status)
"""

MEMORY_IDS = """
MATCH (m:Memory) WHERE ($after IS NULL OR m.id > $after) AND ($tenant IS NULL OR m.user_id = $tenant)
WITH m ORDER BY m.id LIMIT $limit
RETURN m.id AS id
"""

# A consistent read of one page of Memories with their documents, for engram backup.
EXPORT_PAGE = """
MATCH (m:Memory) WHERE ($after IS NULL OR m.id > $after) AND ($tenant IS NULL OR m.user_id = $tenant)
WITH m ORDER BY m.id LIMIT $limit
OPTIONAL MATCH (d:Document)-[:HAS_CHUNK]->(m)
RETURN m {.*} AS memory, d {.*} AS document
"""
