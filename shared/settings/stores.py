"""Where Engram's data lives: the data folder, Redis, Neo4j (the primary) and Qdrant (the backup).

Secrets are ``SecretStr`` (masked in repr, str and dumps) and never part of a URL: the Redis
password is ``ENGRAM_REDIS_PASSWORD``, or when that is unset the data folder's
``secrets/redis.password`` that ``ops/`` makes (see :mod:`shared.secrets`), so a process started
with no variable set finds the password of the Redis ``ops/`` runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator

from shared import secrets
from shared.errors import ConfigurationError

DEV_NEO4J_PASSWORD = "engram-dev-password"


def empty_secret_is_unset(value: object) -> object:
    """An empty variable (``ENGRAM_REDIS_PASSWORD=``) means no secret, not an empty one."""
    if value == "" or (isinstance(value, SecretStr) and not value.get_secret_value()):
        return None
    return value


class StoreSettings(BaseModel):
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
    redis_sentinels: str | None = Field(
        None,
        description="Redis Sentinels, host:port,host:port: when set, every client asks them for the "
        "primary and follows a failover (ENGRAM_REDIS_URL then gives only the database and user).",
    )
    redis_sentinel_master: str = Field("engram", description="The name the Sentinels watch the primary by.")
    redis_sentinel_password: SecretStr | None = Field(
        None, description="The Sentinels' own password (their requirepass); unset: they ask for none."
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
        "(a wiped or replaced database gets it again before the next write or search) and its "
        "search indexes online (while one is built, searches that need it are the backup's).",
    )
    neo4j_vector_m: int = Field(
        16, ge=1, le=512, description="The vector index's HNSW links a node (vector.hnsw.m), when it is made."
    )
    neo4j_vector_ef_construction: int = Field(
        200,
        ge=1,
        le=3200,
        description="The vector index's HNSW beam while building (vector.hnsw.ef_construction), when it "
        "is made: with 200 the index finds 0.991 of the exact top 10 at the search's k on 23.6k MiniLM "
        "vectors and 0.963 on 62.7k, with Neo4j's own 100 0.981 and 0.954 (unquantized).",
    )
    neo4j_vector_quantization: bool = Field(
        False,
        description="Quantize the vector index, when it is made (Neo4j 5.26: vector.quantization.enabled, "
        "its own default; 2026.x: type SCALAR, else NONE): smaller, but on 5.26 with a beam of 100 it finds "
        "0.964 of the exact top 10 at the search's k on 23.6k vectors and 0.938 on 62.7k, against 0.981 "
        "and 0.954 unquantized.",
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

    @field_validator(
        "redis_password", "redis_sentinel_password", "signing_key", "qdrant_api_key", mode="before"
    )
    @classmethod
    def _empty_store_secret_is_unset(cls, value: object) -> object:
        return empty_secret_is_unset(value)

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

    @field_validator("redis_sentinels")
    @classmethod
    def _sentinels_are_hosts_and_ports(cls, value: str | None) -> str | None:
        nodes = [node.strip() for node in (value or "").split(",") if node.strip()]
        for node in nodes:
            host, _, port = node.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ConfigurationError(
                    f"ENGRAM_REDIS_SENTINELS: {node!r} is not host:port (give host:port,host:port)"
                )
        return ",".join(nodes) or None

    @model_validator(mode="after")
    def _redis_password_from_the_data_folder(self) -> StoreSettings:
        if self.redis_password is None:
            self.redis_password = secrets.read(self.redis_password_file)
        return self

    def _check_production_secrets(self) -> None:
        """Called by ``Settings`` when ``ENGRAM_ENV=production``, after every group's own checks."""
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
    def redis_sentinel_nodes(self) -> list[tuple[str, int]]:
        """The Sentinels as (host, port); empty when Redis is reached directly at its URL."""
        nodes = [node.rpartition(":") for node in (self.redis_sentinels or "").split(",") if node]
        return [(host.strip("[]"), int(port)) for host, _, port in nodes]

    @property
    def redis_password_file(self) -> Path:
        """Where ``ops/`` keeps the password of the Redis it runs for this data folder."""
        return secrets.redis_password_path(self.data_dir)
