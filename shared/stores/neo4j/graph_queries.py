"""Cypher of the graph Engram derives from Memories: sessions and turn order, entities and their
co-occurrence relations. Every structure here is derived from a Memory's own fields (tenant,
session, position, created_at, document, chunk, content), so a store rebuilt from Qdrant payloads
through the same write path (or ``engram graph backfill``) derives the same graph.

- ``(:Session {id, user_id, session_id})-[:HAS_TURN]->(:Memory)``: one Session per tenant and
  session id.
- ``(:Memory)-[:NEXT]->(:Memory)``: consecutive chunks of a document, and across documents,
  consecutive turns of a session, ordered by position, created_at, document id and chunk index.
- ``(:Memory)-[:MENTIONS]->(:Entity {id, user_id, key, name, kind, aliases})``: one Entity per
  tenant and normalised name.
- ``(:Entity)-[:RELATED {count, memory_ids}]->(:Entity)``: two entities named by the same
  memories (from the smaller id to the larger): how many, and the newest ten as evidence. The
  evidence is bounded so that a write costs the same however many memories name a pair (each
  write rewrote the whole list, and lists of a common pair grow with the store: quadratic). A
  MENTIONS edge says whether its entity was ``paired`` (among the memory's first few), so a
  removal knows which pairs the memory counted in without the full list; an edge written before
  the flag falls back to the list, exact while it holds every memory.
"""

from __future__ import annotations

GRAPH_SCHEMA = (
    "CREATE CONSTRAINT session_id IF NOT EXISTS FOR (s:Session) REQUIRE s.id IS UNIQUE",
    "CREATE CONSTRAINT entity_id IF NOT EXISTS FOR (e:Entity) REQUIRE e.id IS UNIQUE",
    "CREATE INDEX entity_user_key IF NOT EXISTS FOR (e:Entity) ON (e.user_id, e.key)",
    "CREATE INDEX session_user_id IF NOT EXISTS FOR (s:Session) ON (s.user_id)",
)

# The sessions these Memories belong to now, and those that still hold them as a turn (a
# document moved to another session, or out of every session).
SESSIONS_OF = """
UNWIND $ids AS id
MATCH (m:Memory {id: id})
CALL (m) {
    WITH m WHERE m.session_id IS NOT NULL
    RETURN m.user_id AS user_id, m.session_id AS session_id
    UNION
    MATCH (s:Session)-[:HAS_TURN]->(m)
    RETURN s.user_id AS user_id, s.session_id AS session_id
}
RETURN DISTINCT user_id, session_id
"""

# Each session's turns chained in order. The Session node is locked first (a harmless SET), so
# two writers of one session take turns, and the later one reads the earlier one's turns: turns
# arriving out of order, or in batches written at once, end in order. Only NEXT edges that are
# wrong are removed; a session with no turn left goes.
RELINK_SESSIONS = """
UNWIND $sessions AS key
MERGE (s:Session {id: key.id})
ON CREATE SET s.user_id = key.user_id, s.session_id = key.session_id, s.created_at = $now
SET s.relinked_at = $now
WITH s, key
CALL (s, key) {
    MATCH (s)-[h:HAS_TURN]->(gone:Memory)
    WHERE gone.user_id <> key.user_id OR coalesce(gone.session_id, '') <> key.session_id
    OPTIONAL MATCH (gone)-[r:NEXT]-(:Memory {user_id: key.user_id, session_id: key.session_id})
    DELETE r
    WITH DISTINCT h
    DELETE h
}
CALL (s, key) {
    MATCH (m:Memory {session_id: key.session_id}) WHERE m.user_id = key.user_id
    MERGE (s)-[:HAS_TURN]->(m)
}
CALL (s) {
    MATCH (s)-[:HAS_TURN]->(m:Memory)
    WITH m ORDER BY m.position, m.created_at, m.document_id, m.chunk_index
    WITH collect(m) AS turns
    CALL (turns) {
        UNWIND range(0, size(turns) - 1) AS i
        WITH turns[i] AS t, CASE WHEN i + 1 < size(turns) THEN turns[i + 1] END AS wanted
        MATCH (t)-[r:NEXT]->(other:Memory)
        WHERE wanted IS NULL OR other <> wanted
        DELETE r
    }
    CALL (turns) {
        UNWIND range(0, size(turns) - 1) AS i
        WITH turns[i] AS t, CASE WHEN i > 0 THEN turns[i - 1] END AS wanted
        MATCH (other:Memory)-[r:NEXT]->(t)
        WHERE wanted IS NULL OR other <> wanted
        DELETE r
    }
    CALL (turns) {
        UNWIND range(0, size(turns) - 2) AS i
        WITH turns[i] AS a, turns[i + 1] AS b
        WHERE NOT (a)-[:NEXT]->(b)
        MERGE (a)-[:NEXT]->(b)
    }
}
WITH s WHERE NOT (s)-[:HAS_TURN]->()
DELETE s
"""

# Before a Memory's entities are derived again, or it is deleted: its MENTIONS go, and it stops
# being evidence of a relation (a relation with no evidence left goes). Returns the entities it
# named, for PRUNE_ENTITIES.
UNLINK_ENTITIES = """
UNWIND $ids AS id
MATCH (m:Memory {id: id})-[mentions:MENTIONS]->(e:Entity)
WITH m, collect(e) AS entities, collect(mentions) AS edges,
     collect({entity: e, paired: mentions.paired}) AS named
CALL (m, named) {
    UNWIND named AS x
    UNWIND named AS y
    WITH m, x, y
    WHERE x.entity.id < y.entity.id AND coalesce(x.paired, true) AND coalesce(y.paired, true)
    WITH m, x.entity AS a, y.entity AS b, x.paired IS NULL OR y.paired IS NULL AS unflagged
    MATCH (a)-[r:RELATED]->(b)
    WITH m, r WHERE NOT unflagged OR m.id IN r.memory_ids
    SET r.memory_ids = [i IN r.memory_ids WHERE i <> m.id], r.count = r.count - 1
    WITH r WHERE r.count <= 0
    DELETE r
}
FOREACH (edge IN edges | DELETE edge)
RETURN [e IN entities | e.id] AS entities
"""

# A Memory's entities: one Entity per tenant and key (its names kept as aliases), a MENTIONS
# edge (``paired`` when the entity is among those paired), and a RELATED edge per pair counting
# this memory, with it as the newest evidence. Rows list entities in
# id order, so writers of the same entities lock them in the same order.
LINK_ENTITIES = """
UNWIND $rows AS row
MATCH (m:Memory {id: row.id})
CALL (m, row) {
    UNWIND row.entities AS x
    MERGE (e:Entity {id: x.id})
    ON CREATE SET e.user_id = row.user_id, e.key = x.key, e.name = x.name, e.kind = x.kind,
                  e.aliases = [x.name], e.created_at = $now
    // An entity is written only when it learns something (a new alias, that it is a person):
    // the many memories naming one entity do not each rewrite it.
    FOREACH (_ IN CASE WHEN NOT x.name IN e.aliases AND size(e.aliases) < 16 THEN [1] ELSE [] END |
        SET e.aliases = e.aliases + x.name)
    FOREACH (_ IN CASE WHEN x.kind = 'person' AND e.kind <> 'person' THEN [1] ELSE [] END |
        SET e.kind = 'person')
    MERGE (m)-[mentions:MENTIONS]->(e)
    SET mentions.paired = x.paired
}
CALL (m, row) {
    UNWIND row.pairs AS pair
    // Two lookups by unique id, one row each: two MATCHes, so Neo4j does not warn of a
    // cartesian product (a notification logged with the whole query on every write).
    MATCH (a:Entity {id: pair[0]})
    MATCH (b:Entity {id: pair[1]})
    MERGE (a)-[r:RELATED]->(b)
    ON CREATE SET r.memory_ids = [], r.count = 0
    // A derive unlinks the memory first, so it is never counted twice; the guard is for the
    // newest evidence, which it can see.
    WITH m, r WHERE NOT m.id IN r.memory_ids
    SET r.count = r.count + 1, r.memory_ids = (r.memory_ids + m.id)[-10..]
}
"""

# An entity no memory names any more is gone.
PRUNE_ENTITIES = """
UNWIND $ids AS id
MATCH (e:Entity {id: id}) WHERE NOT (e)<-[:MENTIONS]-(:Memory)
DETACH DELETE e
"""

# The Memories a derive reads (backfill, restore): their own fields only.
MEMORIES_TO_DERIVE = """
UNWIND $ids AS id
MATCH (m:Memory {id: id})
RETURN m.id AS id, m.user_id AS user_id, m.session_id AS session_id, m.content AS content,
       coalesce(m.term_vector STARTS WITH $format, false) AS vectored
"""

# Term vectors of Memories written before the store kept them, or kept them made another way (the
# content is what they count); one a write has made meanwhile stays.
SET_TERM_VECTORS = """
UNWIND $rows AS row
MATCH (m:Memory {id: row.id}) WHERE NOT coalesce(m.term_vector STARTS WITH $format, false)
SET m.term_vector = row.vector
"""

# A page of Memories, by id, for a backfill of every tenant or one.
MEMORY_PAGE = """
MATCH (m:Memory) WHERE ($user_id IS NULL OR m.user_id = $user_id) AND ($after IS NULL OR m.id > $after)
WITH m ORDER BY m.id LIMIT $limit
RETURN m.id AS id
"""

# What a delete of Memories will remove, read under the same lock and version rule as the delete.
MEMORIES_TO_DELETE = """
MATCH (m:Memory) WHERE {memory_filter} AND ($ids IS NULL OR m.id IN $ids)
SET m.last_write_at = $now
WITH m WHERE coalesce(m.version, 0) <= $version
RETURN m.id AS id
"""

DOCUMENT_MEMORIES_TO_DELETE = """
UNWIND $keys AS key
MATCH (doc:Document {id: key})
SET doc.last_write_at = $now
WITH doc WHERE coalesce(doc.version, 0) <= $version
MATCH (doc)-[:HAS_CHUNK]->(m:Memory)
RETURN m.id AS id
"""

STALE_CHUNKS = """
UNWIND $documents AS d
MATCH (:Document {id: d.key})-[:HAS_CHUNK]->(old:Memory)
WHERE coalesce(old.version, 0) < d.version
RETURN old.id AS id
"""

# Reading entities (GET /api/entities). Every query is scoped to one tenant by $user_id.
ENTITY_FIELDS = """
e {.id, .key, .name, .kind, .aliases, memories: COUNT { (e)<-[:MENTIONS]-(:Memory) }}
"""

LIST_ENTITIES = f"""
MATCH (e:Entity) WHERE e.user_id = $user_id
  AND ($kind IS NULL OR e.kind = $kind)
  AND ($prefix IS NULL OR e.key STARTS WITH $prefix
       OR any(alias IN e.aliases WHERE toLower(alias) STARTS WITH $prefix))
  AND ($text IS NULL OR e.key CONTAINS $text)
WITH e, COUNT {{ (e)<-[:MENTIONS]-(:Memory) }} AS n
ORDER BY n DESC, e.key
SKIP $offset LIMIT $limit
RETURN {ENTITY_FIELDS} AS entity
"""

GET_ENTITY = f"""
MATCH (e:Entity {{id: $id}}) WHERE e.user_id = $user_id
CALL (e) {{
    MATCH (e)<-[:MENTIONS]-(m:Memory)
    WITH m ORDER BY m.created_at DESC, m.id LIMIT $memories
    RETURN collect(m {{.id, .content, .document_id, .session_id, .created_at, .memory_type}}) AS memories
}}
CALL (e) {{
    MATCH (e)-[r:RELATED]-(other:Entity)
    WITH other, r ORDER BY r.count DESC, other.key LIMIT $related
    RETURN collect({{entity: other {{.id, .key, .name, .kind}}, count: r.count,
                    memory_ids: r.memory_ids[..10]}}) AS related
}}
RETURN {ENTITY_FIELDS} AS entity, memories, related
"""

# Search: the tenant's entities with these keys (or aliases), with how many memories name them.
ENTITIES_BY_KEY = """
UNWIND $keys AS key
MATCH (e:Entity {user_id: $user_id, key: key})
RETURN e.id AS id, e.key AS key, COUNT { (e)<-[:MENTIONS]-(:Memory) } AS n
"""

# Search sources (shared/search/graph_sources.py); built in graph.py with the search filter.
# Memories naming the query's entities, those naming more of them first, each entity named by at
# most $max_memories memories (a speaker named in every turn tells nothing).
ENTITY_CANDIDATES = """
UNWIND $keys AS key
MATCH (e:Entity {user_id: $user_id, key: key})
WITH e WHERE COUNT { (e)<-[:MENTIONS]-(:Memory) } <= $max_memories
MATCH (e)<-[:MENTIONS]-(m:Memory)
WHERE {memory_filter} AND m.embedding IS NOT NULL
WITH m, count(DISTINCT e) AS named
WITH m, named, vector.similarity.cosine(m.embedding, $vector) AS score
ORDER BY named DESC, score DESC, m.id
LIMIT $k
RETURN collect({memory: {fields}, score: score}) AS kept
"""

# The turns (or chunks) just before and after these hits, along NEXT.
BESIDE_CANDIDATES = """
UNWIND $ids AS id
MATCH (h:Memory {id: id}) WHERE h.user_id = $user_id
MATCH (h)-[:NEXT]-(m:Memory)
WHERE {memory_filter} AND m.embedding IS NOT NULL
WITH DISTINCT m
RETURN collect({memory: {fields}, score: vector.similarity.cosine(m.embedding, $vector)}) AS kept
"""

# Re-scoring: which of these memories name which of the query's (not too common) entities, and
# how many memories name each; and the NEXT edges among these memories.
MENTIONS_AMONG = """
UNWIND $keys AS key
MATCH (e:Entity {user_id: $user_id, key: key})
WITH e, COUNT { (e)<-[:MENTIONS]-(:Memory) } AS n WHERE n <= $max_memories
OPTIONAL MATCH (e)<-[:MENTIONS]-(m:Memory) WHERE m.id IN $ids
RETURN e.key AS key, n, collect(m.id) AS ids
"""

NEXT_AMONG = """
UNWIND $ids AS id
MATCH (a:Memory {id: id})-[:NEXT]->(b:Memory) WHERE a.user_id = $user_id AND b.id IN $ids
RETURN a.id AS a, b.id AS b
"""
