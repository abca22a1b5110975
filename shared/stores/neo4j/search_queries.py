"""Cypher of searches, as constants with parameters.

Filters are fixed clauses over parameters; an absent one is switched off by a null. The tenant
is a clause of every query, and of the fulltext index's own query: Lucene's limit counts only the
tenant's matches, so another tenant's data never crowds them out.
"""

from __future__ import annotations

from shared.stores.neo4j.filters import MEMORY_FILTER
from shared.stores.neo4j.schema_queries import VECTOR_INDEX

# The content and the tenant in one fulltext index, read by Lucene's English analyser (stems, no
# stop words): a query names both fields. The tenant is its token (shared.search.text.tenant_token:
# one term of digits no other tenant has), so the index's matches are the tenant's own and a count
# reads no node's user_id back. Earlier versions' indexes (the tenant by its id's words; the
# standard analyser) are dropped first: Neo4j takes any fulltext index on the same properties for
# this one and would not make it. Bootstrap gives every Memory without a token its token first
# (schema.py), then waits until the new index is online; searches are the backup's meanwhile.
FULLTEXT_INDEX = "memory_content_tenant_token"
OLD_FULLTEXT_INDEXES = ("memory_content_english", "memory_content_tenant", "memory_content")
FULLTEXT_SCHEMA = (
    *(f"DROP INDEX {old} IF EXISTS" for old in OLD_FULLTEXT_INDEXES),
    f"CREATE FULLTEXT INDEX {FULLTEXT_INDEX} IF NOT EXISTS FOR (m:Memory) "
    "ON EACH [m.content, m.tenant_token] OPTIONS {indexConfig: {`fulltext.analyzer`: 'english'}}",
)

# The tenants some of whose Memories have no token yet (written by a version before tokens).
TENANTS_WITHOUT_TOKENS = """
MATCH (m:Memory) WHERE m.tenant_token IS NULL
RETURN DISTINCT m.user_id AS user_id
"""

# Each of them given its token, in batches (one statement of its own: CALL IN TRANSACTIONS).
SET_TENANT_TOKENS = """
UNWIND $tenants AS t
MATCH (m:Memory {user_id: t.user_id}) WHERE m.tenant_token IS NULL
CALL (m, t) { SET m.tenant_token = t.token } IN TRANSACTIONS OF 5000 ROWS
"""

# The indexes a search reads through, as SHOW INDEXES gives them: Neo4j holds a read of a
# populating index until it is online and refuses one of an index that is gone (search.py).
SEARCH_INDEXES = (
    "SHOW INDEXES YIELD name, state, populationPercent, properties WHERE name IN $names "
    "RETURN name, state, populationPercent AS percent, properties"
)

# created_at as epoch microseconds: the driver's DateTime hydration cost a tenth of a millisecond a
# row, a fifth of a search's time (measured with cProfile; Hit.from_row reads either). The term
# vector (written with the content) gives the keyword score its counts without tokenising.
FIELDS = """
m {.id, .content, .content_hash, .memory_type, .importance, .document_id, .chunk_index, .token_count,
   .title, .session_id, .project_id, .tags, .term_vector,
   created_at_us: m.created_at.epochSeconds * 1000000 + m.created_at.microsecond}
"""

# How many of the tenant's memories pass the filters, counted up to $limit.
COUNT_FILTERED = f"""
MATCH (m:Memory) WHERE {MEMORY_FILTER}
WITH m LIMIT $limit
RETURN count(m) AS n
"""

# Of the index's nearest (m, score; nearest first): how many it gave (`found`, so the caller knows
# whether it ran out: found < k), and the first $keep passing the filters, read and sent.
_NEAREST_KEPT = f"""
WITH count(*) AS found, collect(CASE WHEN {MEMORY_FILTER} THEN [m, score] END)[..$keep] AS nearest
CALL (nearest) {{
    UNWIND nearest AS pair
    WITH pair[0] AS m, pair[1] AS score
    RETURN collect({{memory: {FIELDS}, score: score}}) AS kept
}}
RETURN found, kept
"""

# The index's k nearest of every tenant, the first $keep passing the filters kept (the index
# yields the nearest first). Only those kept are read and sent: a small tenant's k may be
# thousands, its pool tens. The index scores cosine as (1 + cos) / 2.
VECTOR_CANDIDATES = f"""
CALL db.index.vector.queryNodes('{VECTOR_INDEX}', $k, $vector) YIELD node AS m, score
{_NEAREST_KEPT}"""

# The same where the index holds the tenant (Neo4j 2026.02+, Cypher 25's SEARCH): its k nearest
# are the tenant's own, however small a share of the store it is, so k need not grow past the
# pool for the tenant; the other filters are applied after, as above. SEARCH scores as queryNodes
# does.
VECTOR_CANDIDATES_IN_INDEX = f"""
CYPHER 25
MATCH (m:Memory)
  SEARCH m IN (VECTOR INDEX {VECTOR_INDEX} FOR $vector WHERE m.user_id = $user_id LIMIT $k) SCORE AS score
{_NEAREST_KEPT}"""

# The filtered set scanned exactly: complete, and (the caller makes sure) small.
EXACT_CANDIDATES = f"""
MATCH (m:Memory)
WHERE {MEMORY_FILTER} AND m.embedding IS NOT NULL
WITH m, vector.similarity.cosine(m.embedding, $vector) AS score
ORDER BY score DESC, m.id
LIMIT $k
RETURN collect({{memory: {FIELDS}, score: score}}) AS kept
"""

# The tenant's fulltext matches (the tenant is in $text), filtered, with their cosine.
FULLTEXT_CANDIDATES = f"""
CALL db.index.fulltext.queryNodes('{FULLTEXT_INDEX}', $text, {{limit: $k}}) YIELD node AS m
WITH count(*) AS found,
     collect(CASE WHEN {MEMORY_FILTER} AND m.embedding IS NOT NULL
             THEN {{memory: {FIELDS}, score: vector.similarity.cosine(m.embedding, $vector)}} END) AS kept
RETURN found, kept
"""

# How many of the tenant's memories hold each word (counted up to $cap): the tenant's token is a
# clause of each query, so every match is the tenant's own and no node is read back (with each
# match's user_id compared, a query's counts cost Neo4j 22-23 CPU-ms at 50k; without, 3-6:
# docs/bench/figures.md).
TERM_FREQUENCIES = f"""
UNWIND $queries AS q
CALL (q) {{
    CALL db.index.fulltext.queryNodes('{FULLTEXT_INDEX}', q.lucene, {{limit: $cap}}) YIELD node
    RETURN count(node) AS df
}}
RETURN q.term AS term, df
"""

TENANT_STATS = """
MATCH (m:Memory) WHERE m.user_id = $user_id
RETURN count(m) AS documents, avg(m.token_count) AS average_length
"""

# The moment of the tenant's newest memory: "now" for the time a query names, when it gives none.
NEWEST_MEMORY = """
MATCH (m:Memory) WHERE m.user_id = $user_id
RETURN max(m.created_at) AS newest
"""

# Up to $n chunks before and after each memory, along NEXT (at most 5: a bound is no parameter).
NEIGHBOURS = """
UNWIND $ids AS id
MATCH (m:Memory {id: id}) WHERE m.user_id = $user_id
CALL (m) {
    OPTIONAL MATCH p = (b:Memory)-[:NEXT*1..5]->(m) WHERE length(p) <= $n
    WITH b, length(p) AS d ORDER BY d DESC
    RETURN collect(b.content) AS before
}
CALL (m) {
    OPTIONAL MATCH p = (m)-[:NEXT*1..5]->(a:Memory) WHERE length(p) <= $n
    WITH a, length(p) AS d ORDER BY d
    RETURN collect(a.content) AS after
}
RETURN id, before, after
"""

# How many of these documents the store holds (engram eval --reuse).
STORED_DOCUMENTS = """
UNWIND $keys AS key
MATCH (d:Document {id: key})
RETURN count(d) AS n
"""

# Pseudo-relevance feedback in one read (it was two: the best memories' vectors, then the scores
# with the vector they moved the query to). Rocchio as shared.search.fusion.feedback_vector does
# it: each of the best vectors to unit length, their mean times $weight added to the (unit) query
# $original; the moved vector comes back un-normalised (cosine does not mind its length). Then,
# per candidate of $ids, its cosine (as (1 + cos) / 2) with the query and with the moved vector;
# a candidate the tenant does not hold (or without a vector) is left out.
FEEDBACK_SCORES = """
UNWIND $best AS id
OPTIONAL MATCH (b:Memory {id: id}) WHERE b.user_id = $user_id AND b.embedding IS NOT NULL
WITH [v IN collect(b.embedding) | {v: v, n: sqrt(reduce(s = 0.0, x IN v | s + x * x))}] AS best
WITH CASE WHEN size(best) = 0 OR $weight <= 0 THEN $original
     ELSE [i IN range(0, size($original) - 1) |
           $original[i] + $weight * reduce(s = 0.0, b IN best |
               s + b.v[i] / CASE WHEN b.n < 1e-12 THEN 1e-12 ELSE b.n END) / size(best)]
     END AS moved
UNWIND $ids AS id
OPTIONAL MATCH (m:Memory {id: id}) WHERE m.user_id = $user_id AND m.embedding IS NOT NULL
RETURN moved, collect(CASE WHEN m IS NULL THEN null ELSE
    [id, vector.similarity.cosine(m.embedding, $original), vector.similarity.cosine(m.embedding, moved)]
END) AS scores
"""

# Cosine (as (1 + cos) / 2) of the tenant's memories with two vectors: the query's, and the one
# feedback moved it to.
TWO_SCORES = """
UNWIND $ids AS id
MATCH (m:Memory {id: id}) WHERE m.user_id = $user_id AND m.embedding IS NOT NULL
RETURN id, vector.similarity.cosine(m.embedding, $original) AS original,
       vector.similarity.cosine(m.embedding, $moved) AS moved
"""
