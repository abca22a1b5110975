"""Search: candidate sources behind one Protocol, and pure fusion, ranking and shaping.

- ``sources``: the Neo4j vector index, the Neo4j fulltext index, Qdrant (the fallback).
- ``bm25`` and ``text``: keyword scores with the tenant's own statistics; the words of a query.
- ``fusion``: blend, weighted RRF, one signal alone.
- ``ranking``: thresholds (global and per type), nudges (two presets), dedup, MaxSim, top_k.
- ``shaping``: results with explanations, neighbours, a token budget and context for agents.
- ``searcher``: the one place they are put together (the query worker, the fallback, eval).
"""

from shared.search.records import Candidate, Fused, Hit, Ranked
from shared.search.searcher import QueryEmbeddingCache, Searcher, fuse
from shared.search.sources import (
    BackupCandidates,
    CandidateSource,
    NearestMemories,
    Query,
    SearchStore,
    VectorBackup,
    backup_candidates,
)
from shared.search.text import query_terms, tokens

__all__ = [
    "BackupCandidates",
    "Candidate",
    "CandidateSource",
    "Fused",
    "Hit",
    "NearestMemories",
    "Query",
    "QueryEmbeddingCache",
    "Ranked",
    "SearchStore",
    "Searcher",
    "VectorBackup",
    "backup_candidates",
    "fuse",
    "query_terms",
    "tokens",
]
