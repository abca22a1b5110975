"""What a worker process holds for its whole life: the model, the store clients, Redis.

Each is made on first use inside the process that uses it (never in the parent before a fork), so
an ingest worker never loads Qdrant and a write worker never loads the model.
"""

from __future__ import annotations

from functools import cache

from shared.chunking import Chunker
from shared.embedding import Embedder, make_embedder
from shared.progress import Progress
from shared.redis_client import connect
from shared.settings import Settings, get_settings
from shared.staging import Staging
from shared.stores.neo4j import Neo4jStore
from shared.stores.qdrant import QdrantStore
from shared.tokenizer import load_tokenizer


def settings() -> Settings:
    return get_settings()


@cache
def embedder() -> Embedder:
    return make_embedder(settings())


@cache
def chunker() -> Chunker:
    s = settings()
    return Chunker(load_tokenizer(s), s.chunk_size_tokens, s.chunk_overlap_tokens)


@cache
def staging() -> Staging:
    return Staging(connect(settings()), settings().staging_ttl_s)


@cache
def progress() -> Progress:
    return Progress(connect(settings()), settings().staging_ttl_s)


@cache
def neo4j() -> Neo4jStore:
    return Neo4jStore(settings())


_schema_ready: set[tuple[str, int]] = set()


def neo4j_with_schema(model: str, dimension: int) -> Neo4jStore:
    """The store, with its schema made for this model once per process."""
    store = neo4j()
    if (model, dimension) not in _schema_ready:
        store.bootstrap(model, dimension)
        _schema_ready.add((model, dimension))
    return store


@cache
def qdrant(model: str, dimension: int) -> QdrantStore:
    return QdrantStore(settings(), dimension=dimension, model=model)
