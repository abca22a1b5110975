"""How a search runs and ranks: its sizes and timeout, fusion, feedback, the time a query names,
the nudges, a reranker, the agentic round, the graph's candidates, and the query worker's caches."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr


class SearchSettings(BaseModel):
    search_default_top_k: int = Field(10, ge=1, description="Results when a search does not say.")
    search_max_top_k: int = Field(100, ge=1, description="Most results a search may ask for.")
    search_default_threshold: float | None = Field(
        None, ge=-1.0, le=1.0, description="Least cosine similarity returned; none by default."
    )
    search_timeout_s: float = Field(
        10.0,
        gt=0,
        description="How long a caller waits for the query worker; a search's read Neo4j has not "
        "answered in half of it is stopped, and the search asks the backup.",
    )
    search_oversample: int = Field(
        4, ge=1, description="Candidates taken from each source per result asked (the fusion pool)."
    )
    search_exact_scan_limit: int = Field(
        2000,
        ge=0,
        description="A filtered set of at most this many memories is scanned exactly, not via the index.",
    )
    search_vector_min_k: int = Field(
        1,
        ge=1,
        description="Fewest nearest neighbours asked of the vector index, the fusion pool the best of them "
        "(1: the pool itself). More finds more of the exact nearest and costs time: at 100k memories "
        "with Neo4j's own index options (quantized) recall@10 was 0.954 at k=40, 0.976 at 100, 0.978 "
        "at 200, and 100 took a 10% tenant's vector search from 62 to 98 ms p50; the index Engram makes "
        "(unquantized, ENGRAM_NEO4J_VECTOR_*) finds 0.963 at k=40 and 0.983 at 100 on 62.7k.",
    )
    search_vector_max_k: int = Field(
        10000, ge=1, description="Most nearest neighbours asked of the vector index while oversampling."
    )
    search_query_max_words: int = Field(
        64,
        ge=1,
        le=64,
        description="Words of a query every search stage reads (the model, the indexes, the time it "
        "names), at most 16 characters each: a search costs what a long question does whatever the "
        "query's length (an 8 KB query embedded whole took 240 ms of the model, 64 words 27 ms). The "
        "eval sets' longest question has 22 words; 64 is also the keyword terms' own bound.",
    )
    search_fulltext_max_candidates: int = Field(
        4000, ge=1, description="Most fulltext matches read per search while oversampling."
    )
    search_fusion: Literal["adaptive", "blend", "rrf"] = Field(
        "adaptive",
        description="adaptive (keyword weight per query from its rarest word), blend (similarity and "
        "keyword scores, by ratio) or rrf (weighted ranks).",
    )
    search_keyword_weight_max: float = Field(
        0.3, ge=0.0, le=1.0, description="adaptive: the keyword weight of a query whose rarest word is rare."
    )
    search_rarity_low: float = Field(
        0.5, ge=0.0, le=1.0, description="adaptive: rarity (idf share) below which keywords get no weight."
    )
    search_rarity_high: float = Field(
        0.8, ge=0.0, le=1.0, description="adaptive: rarity from which keywords get the full weight."
    )
    search_keyword_ratio: float = Field(
        0.3, ge=0.0, le=1.0, description="Share of the keyword score in the fused score (0: similarity only)."
    )
    search_rrf_k: int = Field(60, ge=1, description="k of reciprocal rank fusion.")
    search_feedback_weight: float = Field(
        1.0,
        ge=0.0,
        le=4.0,
        description="Pseudo-relevance feedback: the query vector moves toward the mean of the first "
        "round's best by this weight, and the index is asked again (0: off).",
    )
    search_feedback_docs: int = Field(
        5, ge=1, le=50, description="Best memories of the first round fed back."
    )
    search_feedback_max_keyword_weight: float = Field(
        0.15,
        ge=0.0,
        le=1.0,
        description="The feedback round runs only for queries whose adaptive keyword weight is at most "
        "this: a query of rare words (names, places) is found by them, and feedback drifts it.",
    )
    search_feedback_expand: bool = Field(
        False,
        description="The feedback round also asks the index for new candidates with the moved vector "
        "(off: it re-scores the first round's candidates, one query less).",
    )
    search_time_weight: float = Field(
        0.2,
        ge=0.0,
        le=1.0,
        description="Nudge for memories made within a time the query names ('in May 2023', 'last "
        "year'); 0: off.",
    )
    search_time_slack_days: float = Field(
        3.0, ge=0.0, description="Days after a named time that still count as within it (said later)."
    )
    search_stats_ttl_s: float = Field(
        30.0,
        ge=0,
        description="How long a query worker keeps what it learned of a tenant: keyword statistics, "
        "the size of a filtered set and the oversampling it needed.",
    )
    search_ranking_preset: Literal["additive", "seed004"] = Field(
        "additive",
        description="additive: fused score + the nudges below; seed004: 50/30/15/5 similarity, "
        "importance, type, recency.",
    )
    search_importance_weight: float = Field(0.0, ge=0.0, le=1.0, description="Nudge per unit of importance.")
    search_recency_weight: float = Field(0.0, ge=0.0, le=1.0, description="Nudge for new memories.")
    search_recency_half_life_days: float = Field(30.0, gt=0, description="Age that halves the recency nudge.")
    search_memory_type_weights: dict[str, float] = Field(
        default_factory=dict, description='Nudge per memory_type, as JSON: {"fact": 0.05}.'
    )
    search_type_thresholds: dict[str, float] = Field(
        default_factory=dict,
        description='Least similarity per memory_type, over the global one, as JSON: {"note": 0.3}.',
    )
    search_one_per_document: bool = Field(
        False, description="Return only the best chunk of each document (MaxSim)."
    )
    search_reranker_url: str | None = Field(
        None, description="A reranker (cross-encoder) server; off when unset."
    )
    search_reranker_api: Literal["tei", "cohere"] = Field(
        "tei", description="tei (POST /rerank) or cohere (any Cohere/Jina-style POST /v1/rerank)."
    )
    search_reranker_model: str | None = Field(None, description="Model named to a cohere-style reranker.")
    search_reranker_api_key: SecretStr | None = Field(None, description="Bearer key of the reranker.")
    search_rerank_top_n: int = Field(20, ge=1, le=200, description="Results the reranker reorders.")
    search_agent_url: str | None = Field(
        None, description="Chat model for the agentic second round (seed 002); off when unset."
    )
    search_agent_api: Literal["openai", "ollama"] = Field(
        "openai", description="openai (any compatible /v1/chat/completions) or ollama (/api/chat)."
    )
    search_agent_model: str = Field("llama3.2", description="Chat model of the agentic round.")
    search_agent_api_key: SecretStr | None = Field(None, description="Bearer key of the chat endpoint.")
    search_agent_max_queries: int = Field(3, ge=1, le=5, description="Follow-up queries the agent may ask.")
    query_cache_size: int = Field(1024, ge=0, description="Query embeddings cached per query worker.")
    model_check_interval_s: float = Field(
        2.0, ge=0, description="How often a query worker re-reads the store's model (a migration)."
    )

    # The graph's candidates and lifts (shared/search/graph_sources.py).
    search_entity_expansion: bool = Field(
        False, description="Memories naming the query's entities join the candidates."
    )
    search_entity_max_memories: int = Field(
        50, ge=1, description="An entity named by more memories than this is too common to expand."
    )
    search_session_evidence: bool = Field(
        False, description="The turns next to the first hits (along NEXT) join the candidates."
    )
    search_session_hits: int = Field(5, ge=1, le=50, description="First hits whose neighbours join.")
    search_entity_weight: float = Field(
        0.0, ge=0.0, le=1.0, description="Lift of a memory naming the query's entities (x the best fused)."
    )
    search_session_weight: float = Field(
        0.0, ge=0.0, le=1.0, description="Lift of a memory by its neighbouring turns' fused scores."
    )
