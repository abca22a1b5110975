"""How a document goes through the stages: embedding, chunking, the tasks' limits and retries,
and the graph's entities found at write time."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator

from shared.errors import ConfigurationError
from shared.settings.stores import empty_secret_is_unset

EmbeddingBackend = Literal["local", "tei", "ollama", "openai"]


def user_cache() -> Path:
    """The user's cache folder, as the XDG base directories name it (ops/ keeps its builds there too)."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "engram"


class PipelineSettings(BaseModel):
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
    local_compute: Literal["int8", "float"] = Field(
        "int8",
        description="How the local model's matrix products run: int8 (a quantized copy of the model, "
        "made once into ENGRAM_LOCAL_MODEL_CACHE; each text a run of its own: 0.6 of the CPU a chunk) or "
        "float (the file as it is).",
    )
    local_model_cache: Path | None = Field(
        None,
        description="Where the int8 copy of the local model is kept, shared by the processes of a "
        "machine; unset: $XDG_CACHE_HOME/engram/models (~/.cache/engram/models).",
    )
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

    # Input limits of every way in.
    max_document_bytes: int = Field(1_000_000, ge=1, description="Largest document text, UTF-8 bytes.")

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
    delete_confirm_timeout_s: float = Field(
        30.0, gt=0, description="How long a delete waits for Qdrant's confirmation before reporting."
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

    @field_validator("embedding_api_key", mode="before")
    @classmethod
    def _empty_embedding_key_is_unset(cls, value: object) -> object:
        return empty_secret_is_unset(value)

    @model_validator(mode="after")
    def _check_pipeline(self) -> PipelineSettings:
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
        return self
