"""Every setting of Engram, read once from ``ENGRAM_*`` variables and ``.env``.

No other module reads the environment: they call :func:`get_settings`. Every default is safe for
local use; placeholder secrets are refused when ``ENGRAM_ENV=production``.

Secrets are ``SecretStr`` (masked in repr, str and dumps) and never part of a URL: the Redis
password is ``ENGRAM_REDIS_PASSWORD``, or when that is unset the data folder's
``secrets/redis.password`` that ``ops/`` makes (see :mod:`shared.secrets`), so a process started
with no variable set finds the password of the Redis ``ops/`` runs.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared import secrets
from shared.errors import ConfigurationError

DEV_NEO4J_PASSWORD = "engram-dev-password"

EmbeddingBackend = Literal["local", "tei", "ollama", "openai"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="ENGRAM_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    env: Literal["development", "production"] = Field(
        "development",
        description="production refuses placeholder and missing secrets (Neo4j, Redis, Qdrant server).",
    )
    data_dir: Path = Field(Path(".engram"), description="Local data of Redis, Neo4j and Qdrant.")

    # Broker and result backend.
    redis_url: str = Field(
        "redis://127.0.0.1:6379/0",
        description="Celery broker and results, staging, progress; no password in it.",
    )
    redis_password: SecretStr | None = Field(
        None, description="Redis password; when unset, read from data_dir/secrets/redis.password if there."
    )
    signing_key: SecretStr | None = Field(
        None,
        description="Seals webhook signing secrets in Neo4j; unset: data_dir/secrets/signing.key, made once.",
    )

    # Neo4j, the primary store.
    neo4j_uri: str = Field("bolt://127.0.0.1:7687", description="The primary store.")
    neo4j_user: str = Field("neo4j", description="Neo4j user.")
    neo4j_password: SecretStr = Field(SecretStr(DEV_NEO4J_PASSWORD), description="Neo4j password.")
    neo4j_database: str = Field("neo4j", description="Neo4j database name.")
    neo4j_max_pool_size: int = Field(16, ge=1, description="Bolt connections per process.")
    neo4j_schema_check_s: float = Field(
        5.0,
        ge=0,
        description="How often a process looks whether Neo4j still holds the schema it made "
        "(a wiped or replaced database gets it again before the next write or search).",
    )

    # Qdrant, the backup vector store: a server when the URL is set, else embedded at the path.
    qdrant_url: str | None = Field(None, description="Qdrant server; embedded Qdrant when unset.")
    qdrant_api_key: SecretStr | None = Field(None, description="Qdrant server API key (header api-key).")
    qdrant_path: Path | None = Field(
        None, description="Embedded Qdrant folder (local mode); default data_dir/qdrant."
    )
    qdrant_engine: Literal["local", "edge"] = Field(
        "edge",
        description="Embedded engine when no server is set: edge (Qdrant Edge, Qdrant's engine "
        "in-process: payload indexes, a WAL; beta) or local (qdrant-client's local mode: an exact "
        "scan in Python). A local-mode folder is copied into Edge's on first open.",
    )
    qdrant_edge_path: Path | None = Field(
        None,
        description="Embedded Qdrant Edge folder; default data_dir/qdrant-edge. A local-mode folder "
        "found at the embedded path is copied into it on first open.",
    )
    qdrant_collection_prefix: str = Field(
        "engram", description="Collections are named prefix_model_dimension."
    )
    qdrant_timeout_s: float = Field(10.0, gt=0, description="Qdrant server request timeout.")

    # Embedding.
    embedding_backend: EmbeddingBackend = Field(
        "local", description="local (offline ONNX), tei, ollama or openai (any compatible server)."
    )
    embedding_model: str = Field(
        "all-MiniLM-L6-v2", description="Recorded on every Memory; sent to HTTP backends."
    )
    embedding_url: str | None = Field(None, description="Base URL of an HTTP embedding backend.")
    embedding_api_key: SecretStr | None = Field(None, description="Bearer key of the openai backend.")
    embedding_dimension: int | None = Field(
        None, ge=1, description="Vector size; probed from the backend when unset."
    )
    embedding_max_tokens: int = Field(
        256, ge=8, description="Longest input the model reads, special tokens included."
    )
    embedding_tokenizer_path: Path | None = Field(
        None, description="tokenizer.json of the model; the bundled MiniLM one when unset."
    )
    embedding_batch_size: int = Field(32, ge=1, le=2048, description="Texts per model call or request.")
    embedding_timeout_s: float = Field(30.0, gt=0, description="HTTP backend request timeout.")
    embedding_max_retries: int = Field(3, ge=0, description="HTTP backend retries per batch.")
    local_model_path: Path | None = Field(None, description="ONNX file; the packaged int8 MiniLM when unset.")
    local_threads: int = Field(
        0, ge=0, description="Model runs side by side, one onnxruntime thread each; 0 = all cores."
    )
    local_run_tokens: int = Field(
        512,
        ge=1,
        description="Most padded tokens in one model run (texts x the longest): small runs stay in the "
        "CPU's caches.",
    )

    # Chunking, in tokens of the embedding model's own tokenizer.
    chunk_size_tokens: int = Field(
        240, ge=16, description="Most tokens in a chunk, without special tokens; + 2 must fit the model."
    )
    chunk_overlap_tokens: int = Field(32, ge=0, description="Tokens shared by neighbouring chunks.")
    chunk_sections: bool = Field(
        True,
        description="Chunks are runs of whole paragraphs cut where the paragraphs' own words say, so an "
        "edited paragraph re-embeds its own chunk and at most its neighbour's; false packs the whole text.",
    )

    # Input limits.
    max_document_bytes: int = Field(1_000_000, ge=1, description="Largest document text, UTF-8 bytes.")
    max_batch_documents: int = Field(1000, ge=1, description="Most documents in one HTTP request.")
    max_request_bytes: int = Field(64_000_000, ge=1, description="Largest HTTP body accepted.")

    # Tasks. Time limits, visibility timeout and backoff are chosen together: a task never runs
    # past the visibility timeout, a retry's countdown plus a run fits inside it (a countdown
    # longer than it would have Redis hand the waiting retry to a second worker), and a SIGKILLed
    # worker's unacknowledged task is back on its queue within the visibility timeout (plus the
    # 10 s in which a live worker looks for such tasks).
    ingest_batch_documents: int = Field(128, ge=1, description="Documents per ingest task from the CLI.")
    task_retry_budget_s: int = Field(
        6 * 3600, ge=0, description="How long a transient failure (a service down) keeps being retried."
    )
    task_retry_backoff_max_s: int = Field(25, ge=1, description="Longest wait between retries.")
    task_soft_time_limit_s: int = Field(
        35, ge=5, description="A task is asked to stop after this; long stages continue in a new task."
    )
    task_time_limit_s: int = Field(45, ge=10, description="A task is killed after this.")
    visibility_timeout_s: int = Field(
        75, ge=30, description="Redis redelivers an unacknowledged task after this (a killed worker's)."
    )
    worker_soft_shutdown_timeout_s: float = Field(
        10.0, ge=0, description="A stopping worker finishes or re-queues its task within this."
    )
    staging_ttl_s: int = Field(7 * 24 * 3600, ge=3600, description="How long unfinished batches wait.")
    redeliver_after_s: int = Field(
        60,
        ge=5,
        description="A stage message the broker holds no copy of this long after its send is sent again "
        "by the reconciler's pass (shared/ledger.py).",
    )

    # Search.
    search_default_top_k: int = Field(10, ge=1, description="Results when a search does not say.")
    search_max_top_k: int = Field(100, ge=1, description="Most results a search may ask for.")
    search_default_threshold: float | None = Field(
        None, ge=-1.0, le=1.0, description="Least cosine similarity returned; none by default."
    )
    search_timeout_s: float = Field(10.0, gt=0, description="How long a caller waits for the query worker.")
    delete_confirm_timeout_s: float = Field(
        30.0, gt=0, description="How long a delete waits for Qdrant's confirmation before reporting."
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
        "recall@10 was 0.954 at k=40, 0.976 at 100, 0.978 at 200; 100 took a 10% tenant's vector "
        "search from 62 to 98 ms p50.",
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

    # The graph (shared/graph): sessions, turn order, entities.
    graph_entities: Literal["builtin", "spacy", "llm", "off"] = Field(
        "builtin",
        description="Entity extractor at write time: builtin (offline rules), spacy (an installed "
        "model package), llm (graph_llm_*), off.",
    )
    graph_max_entities: int = Field(16, ge=1, le=64, description="Most entities kept per memory.")
    graph_related_entities: int = Field(
        8, ge=0, le=16, description="A memory's first entities paired as RELATED (pairs grow as n²)."
    )
    graph_spacy_model: str = Field("en_core_web_sm", description="Installed spaCy model package.")
    graph_llm_url: str | None = Field(None, description="OpenAI-compatible or Ollama base URL.")
    graph_llm_api: Literal["openai", "ollama"] = Field("openai", description="Chat API of graph_llm_url.")
    graph_llm_model: str = Field("llama3.2", description="Chat model that names entities.")
    graph_llm_api_key: SecretStr | None = Field(None, description="Bearer key of the entity model.")
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

    # Model migration (engram reembed).
    reembed_page_size: int = Field(
        128, ge=1, le=4096, description="Memories re-embedded per task of a model migration."
    )

    # Reconciler.
    reconcile_grace_s: int = Field(300, ge=0, description="Pending younger than this is left alone.")
    reconcile_batch_size: int = Field(256, ge=1, description="Memories re-synced per Qdrant call.")
    reconcile_scan_page: int = Field(
        1000, ge=10, description="Memories and points compared per range of the drift scan."
    )
    reconcile_scroll_page: int = Field(
        50_000,
        ge=10,
        description="Points read ahead per Qdrant scroll of the drift scan (embedded local mode sorts "
        "every point id on each scroll, whatever its size).",
    )
    reconcile_scan_budget: int = Field(
        20_000,
        ge=10,
        description="Memories, and points of each collection, a scheduled pass compares at most, going "
        "on from where the last one stopped (engram reconcile compares all).",
    )
    reconcile_interval_s: int = Field(300, ge=10, description="How often beat runs the reconciler.")
    reconcile_min_primary_share: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="The reconciler deletes no point while Neo4j holds fewer Memories than this share "
        "of Qdrant's points (a wiped or new primary): it reports primary_lost.",
    )
    reconcile_max_delete_share: float = Field(
        0.2,
        ge=0.0,
        le=1.0,
        description="Deleting more than this share of a collection's points at once (in a pass, or in a "
        "round of the scheduled sweep, judged on the whole collection) needs --force.",
    )
    reconcile_mass_delete_min: int = Field(
        100,
        ge=0,
        description="Deletions of at most this many points in a pass or round are never a mass one.",
    )
    restore_batch_documents: int = Field(
        64, ge=1, le=4096, description="Documents rebuilt per write of engram restore."
    )
    restore_lock_ttl_s: float = Field(
        60.0,
        ge=1.0,
        le=3600.0,
        description="One restore at a time: its lock frees itself this long after its worker died.",
    )

    # HTTP app.
    api_host: str = Field("127.0.0.1", description="HTTP app address.")
    api_port: int = Field(8000, ge=1, le=65535, description="HTTP app port.")
    auth_mode: Literal["keys", "local"] = Field(
        "keys",
        description="keys: every /api call needs an API key (engram keys); local: none, loopback only.",
    )
    allowed_hosts: list[str] = Field(
        default_factory=lambda: ["127.0.0.1", "localhost", "[::1]"],
        description='Host headers the app answers, as JSON: ["engram.example.com"]; "*" any.',
    )
    auth_cache_s: float = Field(
        5.0, ge=0, description="How long a key is trusted before it is looked up again."
    )
    auth_stale_s: float = Field(
        3600.0, ge=0, description="How long a key seen before still works while Neo4j is unreachable."
    )
    auth_failures_per_address: int = Field(
        100, ge=1, description="Failed keys or sign-ins from one address within the window before 429."
    )
    auth_failures_per_key: int = Field(
        20, ge=1, description="Failed keys or sign-ins naming one key id within the window before 429."
    )
    auth_failures_window_s: int = Field(
        60, ge=1, description="The window failed key checks are counted in (and a 429 lasts at most)."
    )
    webhook_tolerance_s: float = Field(
        300.0, gt=0, description="How far a signed webhook's timestamp may be from now."
    )

    strict_tenants: bool = Field(
        False, description="engram keys create refuses a tenant confusable with an existing one (else warns)."
    )
    allow_lookalike_tenants: bool = Field(
        False,
        description="Take tenants that read as another ASCII name (a Cyrillic a, a fullwidth a); else 422.",
    )

    api_workers: int = Field(
        1, ge=1, le=64, description="HTTP app processes (uvicorn workers); each holds its own searches."
    )
    api_max_pending_searches: int = Field(
        500,
        ge=1,
        description="Searches one app process holds waiting at once; more get 503 with Retry-After.",
    )
    tenant_max_searches: int = Field(
        64,
        ge=1,
        description="Searches of one tenant queued or running at once, all app processes; more get 429.",
    )
    tenant_max_ingests: int = Field(
        16, ge=1, description="Ingest requests of one tenant in flight at once, all app processes; more: 429."
    )
    api_max_connections: int = Field(
        1000, ge=1, description="Connections one app process holds; past it the oldest idle one is closed."
    )
    api_max_connections_per_client: int = Field(
        100,
        ge=1,
        description="Connections one client address holds at once; more get 503 (behind a proxy: raise it).",
    )
    api_anonymous_body_bytes: int = Field(
        8192, ge=0, description="Largest body of a request no key vouches for (/ui/signin, the status page)."
    )
    api_unverified_reads: int = Field(
        8, ge=1, description="Bodies read at once before a key vouches for them (signed webhooks); more: 503."
    )
    api_docs: bool = Field(
        False, description="Serves /docs and /redoc (their pages load scripts from a CDN)."
    )
    api_keep_alive_s: int = Field(5, ge=1, description="An idle kept-alive connection is closed after this.")
    api_header_timeout_s: float = Field(
        10.0, gt=0, description="A request's headers must arrive within this of its first byte, else closed."
    )
    api_body_timeout_s: float = Field(
        30.0, gt=0, description="A request's body must be complete this long after its headers, else 408."
    )

    # Logs and metrics (shared/logging_setup.py, shared/metrics.py).
    log_format: Literal["json", "text"] | None = Field(
        None,
        description="json: a JSON object a line; text: for people. Unset: json for services, text for CLI.",
    )
    log_level: str = Field("INFO", description="Level of the app's and the CLI's logs (workers: --loglevel).")
    metrics_dir: Path | None = Field(
        None, description="prometheus-client's multiprocess files of every process; default data_dir/metrics."
    )
    flower_address: str = Field("127.0.0.1", description="Flower's address (python -m workers.flower).")
    flower_port: int = Field(5555, ge=1, le=65535, description="Flower's port.")
    flower_password: SecretStr | None = Field(
        None, description="Flower basic-auth password (user engram); unset: data_dir/secrets/flower.password."
    )
    metrics_cache_s: float = Field(
        10.0, ge=0, description="How long /metrics reuses the counts it read from Redis and Neo4j."
    )
    ui_cache_s: float = Field(
        5.0, ge=0, description="How long the status page reuses a tenant's counts and entities it read."
    )
    ui_session_key: SecretStr | None = Field(
        None,
        description="Signs the /ui sign-in cookie; unset: data_dir/secrets/ui-session.key, made once.",
    )
    ui_session_s: int = Field(
        8 * 3600, ge=60, le=7 * 24 * 3600, description="How long a sign-in to the status page (/ui) lasts."
    )

    @field_validator(
        "redis_password",
        "signing_key",
        "qdrant_api_key",
        "embedding_api_key",
        "flower_password",
        "ui_session_key",
        mode="before",
    )
    @classmethod
    def _empty_secret_is_unset(cls, value: object) -> object:
        """An empty variable (``ENGRAM_REDIS_PASSWORD=``) means no secret, not an empty one."""
        if value == "" or (isinstance(value, SecretStr) and not value.get_secret_value()):
            return None
        return value

    @field_validator("redis_url")
    @classmethod
    def _url_holds_no_password(cls, value: str) -> str:
        # A ConfigurationError passes through pydantic as it is: the URL (and its password) is not
        # echoed, as a ValidationError would echo the input.
        try:
            password = urlsplit(value).password
        except ValueError as exc:
            raise ConfigurationError("ENGRAM_REDIS_URL is not a URL") from exc
        if password is not None:
            raise ConfigurationError(
                "ENGRAM_REDIS_URL holds a password: set ENGRAM_REDIS_PASSWORD instead "
                "(URLs are printed in logs and errors; the password must not be)"
            )
        return value

    @model_validator(mode="after")
    def _check(self) -> Settings:
        if self.redis_password is None:
            self.redis_password = secrets.read(self.redis_password_file)
        if self.chunk_size_tokens + 2 > self.embedding_max_tokens:
            raise ConfigurationError(
                f"ENGRAM_CHUNK_SIZE_TOKENS={self.chunk_size_tokens} does not fit the model's "
                f"{self.embedding_max_tokens} tokens with its two special tokens"
            )
        if self.chunk_overlap_tokens >= self.chunk_size_tokens:
            raise ConfigurationError("ENGRAM_CHUNK_OVERLAP_TOKENS must be below ENGRAM_CHUNK_SIZE_TOKENS")
        if self.task_time_limit_s + self.task_retry_backoff_max_s >= self.visibility_timeout_s:
            raise ConfigurationError(
                "ENGRAM_VISIBILITY_TIMEOUT_S must exceed ENGRAM_TASK_TIME_LIMIT_S plus "
                "ENGRAM_TASK_RETRY_BACKOFF_MAX_S, or Redis redelivers tasks that are running or "
                "waiting to retry"
            )
        if self.task_soft_time_limit_s >= self.task_time_limit_s:
            raise ConfigurationError("ENGRAM_TASK_SOFT_TIME_LIMIT_S must be below ENGRAM_TASK_TIME_LIMIT_S")
        if self.embedding_backend != "local" and not self.embedding_url:
            raise ConfigurationError(
                f"ENGRAM_EMBEDDING_BACKEND={self.embedding_backend} needs ENGRAM_EMBEDDING_URL"
            )
        if self.auth_mode == "local" and not is_loopback(self.api_host):
            raise ConfigurationError(
                f"ENGRAM_AUTH_MODE=local serves without API keys, so only on loopback: "
                f"ENGRAM_API_HOST={self.api_host} is not"
            )
        if self.env == "production":
            self._check_production_secrets()
        return self

    def _check_production_secrets(self) -> None:
        if self.neo4j_password.get_secret_value() == DEV_NEO4J_PASSWORD:
            raise ConfigurationError(
                "set ENGRAM_NEO4J_PASSWORD: the development password is refused in production"
            )
        if self.redis_password is None:
            raise ConfigurationError(
                "set ENGRAM_REDIS_PASSWORD: production refuses a Redis without a password"
            )
        if self.qdrant_url is not None and self.qdrant_api_key is None:
            raise ConfigurationError(
                "set ENGRAM_QDRANT_API_KEY: production refuses a Qdrant server without an API key"
            )

    @property
    def qdrant_local_path(self) -> Path:
        return self.qdrant_path or self.data_dir / "qdrant"

    @property
    def qdrant_edge_local_path(self) -> Path:
        return self.qdrant_edge_path or self.data_dir / "qdrant-edge"

    @property
    def metrics_path(self) -> Path:
        return self.metrics_dir or self.data_dir / "metrics"

    @property
    def redis_password_file(self) -> Path:
        """Where ``ops/`` keeps the password of the Redis it runs for this data folder."""
        return secrets.redis_password_path(self.data_dir)


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
