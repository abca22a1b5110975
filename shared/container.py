"""The composition root: one ``Container(settings)`` builds every service a process uses.

Each part is made on first use, inside the process that uses it (never in a parent before a
fork), so an ingest worker never loads Qdrant and a write worker never loads the model. Tests
build the services themselves from fakes; nothing else constructs stores or clients.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path

import redis
from neo4j import GraphDatabase

from shared.chunking import Chunker
from shared.embedding import Embedder, make_embedder
from shared.errors import ConfigurationError, ServiceUnavailable
from shared.ledger import BrokerHolds, Ledger, Sent, broker_holds
from shared.models import utc_now
from shared.progress import Progress
from shared.redis_client import connect
from shared.retry import RetryPolicy
from shared.sealing import SecretBox, box_for
from shared.search import BackupCandidates, Searcher, VectorBackup
from shared.services.backup import QdrantSource
from shared.services.chunk import ChunkStage
from shared.services.embed import EmbedStage
from shared.services.guard import PrimaryGuard
from shared.services.reconcile import Reconciler
from shared.services.redeliver import Redeliverer
from shared.services.reembed import ReembedPages
from shared.services.restore import Restorer
from shared.services.restore_lock import RestoreLock
from shared.services.sync import Syncer
from shared.services.write import WriteStage
from shared.settings import Settings
from shared.staging import Staging
from shared.stores.base import EmbeddingTarget, SearchableVectorStore, VectorConnection
from shared.stores.folders import embedded_folder
from shared.stores.neo4j import Neo4jStore
from shared.stores.neo4j.connection import QUIET
from shared.stores.neo4j_entities import Neo4jEntities
from shared.stores.neo4j_incremental import Neo4jIncremental
from shared.stores.neo4j_keys import Neo4jKeyRows, Neo4jKeyStore
from shared.stores.qdrant import QdrantConnection
from shared.stores.vectors import connect_vectors
from shared.tokenizer import load_tokenizer
from shared.versions import VersionClock


class Container:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._target_embedders: dict[EmbeddingTarget, Embedder] = {}
        self._target_embedders_lock = threading.Lock()  # re-embed pages run on the write worker's threads

    # Connections and stores.

    @cached_property
    def redis(self) -> redis.Redis:
        return connect(self.settings)

    @cached_property
    def staging(self) -> Staging:
        return Staging(self.redis, self.settings.staging_ttl_s)

    @cached_property
    def progress(self) -> Progress:
        return Progress(self.redis, self.settings.staging_ttl_s)

    @cached_property
    def versions(self) -> VersionClock:
        return VersionClock(self.redis)

    @cached_property
    def graph(self) -> Neo4jStore:
        return Neo4jStore(self.settings)

    @cached_property
    def qdrant(self) -> VectorConnection:
        return connect_vectors(self.settings)

    def vectors(self, model: str, dimension: int) -> SearchableVectorStore:
        return self.qdrant.store(model, dimension)

    def vector_connection(self) -> VectorConnection:
        """A connection of its own for one call (a count, a backup), closed by the caller: not
        the process's ``qdrant``, which an embedded folder's owner keeps open."""
        return connect_vectors(self.settings)

    @cached_property
    def incremental(self) -> Neo4jIncremental:
        """What Neo4j holds of each document, for telling a changed one from one stored as given."""
        return Neo4jIncremental(self.graph)

    @cached_property
    def entities(self) -> Neo4jEntities:
        return Neo4jEntities(self.graph)

    @cached_property
    def key_rows(self) -> Neo4jKeyRows:
        """The API keys as Neo4j holds them (hashes, sealed secrets): for a backup and a restore."""
        return Neo4jKeyRows(self.graph)

    @cached_property
    def secret_box(self) -> SecretBox:
        return box_for(self.settings)

    def key_store(self) -> Neo4jKeyStore:
        """The API keys, their signing secrets sealed by this process's box."""
        return Neo4jKeyStore(self.graph, self.secret_box)

    def back_up_vectors(self, folder: Path, stamp: str) -> str:
        """Qdrant's own backup into ``folder``, said in one line: a server's snapshot, downloaded; a copy
        of the embedded folder while this call holds its lock (so no process may hold it)."""
        connection = self.vector_connection()
        started = time.monotonic()
        try:
            if isinstance(connection, QdrantConnection) and not connection.embedded:
                stored = self.graph.stored_model()
                if stored is None:
                    return "Qdrant: nothing stored yet"
                store = connection.store(*stored)
                target = connection.snapshot_into(store.collection, folder)
                took = time.monotonic() - started
                upload = f"POST /collections/{store.collection}/snapshots/upload"
                return (
                    f"Qdrant: the server's snapshot of {store.collection} downloaded to {target} "
                    f"({took:.1f} s); to use it, upload it to a server ({upload})"
                )
            try:
                source = connection.hold()  # holds the folder's lock: no writer meanwhile
            except ServiceUnavailable as exc:
                raise ServiceUnavailable(
                    "qdrant",
                    f"the embedded folder {embedded_folder(self.settings)} is held by another process",
                    "stop the write worker, then run this again",
                ) from exc
            target = folder / f"qdrant-{stamp}"
            shutil.copytree(source, target)
            return (
                f"Qdrant: folder copied to {target} ({time.monotonic() - started:.1f} s); to use it, stop "
                f"the write worker and put it in place of {source}"
            )
        finally:
            connection.close()

    # Models.

    @cached_property
    def embedder(self) -> Embedder:
        return make_embedder(self.settings)

    def embedder_for(self, target: EmbeddingTarget) -> Embedder:
        """The embedder of a migration's target model: these settings with the target's model
        fields in place of the configured ones (the API key stays this process's own)."""
        with self._target_embedders_lock:
            if target not in self._target_embedders:
                settings = self.settings.model_copy(
                    update={
                        "embedding_backend": target.backend,
                        "embedding_model": target.model,
                        "embedding_url": target.url,
                        "embedding_dimension": target.dimension,
                        "embedding_max_tokens": target.max_tokens,
                        "embedding_tokenizer_path": target.tokenizer_path and Path(target.tokenizer_path),
                        "local_model_path": target.local_model_path and Path(target.local_model_path),
                    }
                )
                self._target_embedders[target] = make_embedder(settings)
            return self._target_embedders[target]

    @cached_property
    def chunker(self) -> Chunker:
        s = self.settings
        return Chunker(load_tokenizer(s), s.chunk_size_tokens, s.chunk_overlap_tokens, s.chunk_sections)

    # Services.

    @cached_property
    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy.from_settings(self.settings)

    @cached_property
    def syncer(self) -> Syncer:
        return Syncer(self.graph, self.vectors, utc_now)

    @cached_property
    def chunk_stage(self) -> ChunkStage:
        return ChunkStage(self.chunker, self.staging, self.progress)

    @cached_property
    def embed_stage(self) -> EmbedStage:
        # One slice is one model call, staged as soon as it is done: the smallest unit of work
        # a task can lose to its soft time limit (four calls were: on a loaded machine one such
        # slice outlasted the limit, try after try).
        slice_size = self.settings.embedding_batch_size
        stored = Neo4jIncremental(self.graph)
        return EmbedStage(self.embedder, self.staging, self.progress, slice_size, stored)

    @cached_property
    def write_stage(self) -> WriteStage:
        return WriteStage(self.graph, self.syncer, self.staging, self.progress)

    @cached_property
    def ledger(self) -> Ledger:
        return Ledger(self.redis)

    def redeliverer(
        self, send: Callable[[Sent], None], give_up: Callable[[Sent, str], None], queues: Sequence[str]
    ) -> Redeliverer:
        """Sends lost stage messages again through ``send`` (the worker's Celery app)."""

        def holds() -> BrokerHolds:
            return broker_holds(self.redis, queues, read_at_most=200)

        return Redeliverer(self.ledger, holds, send, give_up, self.settings.redeliver_after_s)

    @cached_property
    def reconciler(self) -> Reconciler:
        s = self.settings
        return Reconciler(
            self.graph,
            self.vectors,
            self.syncer,
            utc_now,
            grace_s=s.reconcile_grace_s,
            batch_size=s.reconcile_batch_size,
            scan_page=s.reconcile_scan_page,
            guard=PrimaryGuard(self.graph, s.reconcile_min_primary_share),
            max_delete_share=s.reconcile_max_delete_share,
            mass_delete_min=s.reconcile_mass_delete_min,
            backup_models=self.qdrant.models,
            scan_budget=s.reconcile_scan_budget,
            scroll_page=s.reconcile_scroll_page,
        )

    @cached_property
    def restorer(self) -> Restorer:
        s = self.settings
        return Restorer(
            self.graph, utc_now, s.restore_batch_documents, s.reconcile_min_primary_share, self.key_rows
        )

    def restore_lock(self) -> RestoreLock:
        """One restore at a time, across processes (shared/services/restore_lock.py)."""
        return RestoreLock(self.redis, self.settings.restore_lock_ttl_s)

    def backup_source(self, model: str | None, dimension: int | None) -> QdrantSource:
        """The collection a restore reads: of the model named, else Neo4j's, else the configured."""
        if model is None:
            stored = self.graph.stored_model()
            model, dimension = stored if stored is not None else (self.settings.embedding_model, dimension)
        if dimension is None:
            dimension = self.settings.embedding_dimension
        if dimension is None:
            found = self.qdrant.dimensions_of(model)
            if len(found) != 1:
                raise ConfigurationError(
                    f"Qdrant holds {len(found)} collections of {model}: name one with --dimension"
                )
            dimension = found[0]
        return QdrantSource(self.vectors(model, dimension))

    @cached_property
    def reembed_pages(self) -> ReembedPages:
        return ReembedPages(self.graph, self.vectors, self.embedder_for)

    @cached_property
    def search_graph(self) -> Neo4jStore:
        """Neo4j for searches: one try per read, so a search falls back to Qdrant at once rather
        than after the driver's retries (seconds of a caller's search timeout); each read one
        auto-commit query, one round trip."""
        s = self.settings
        driver = GraphDatabase.driver(
            s.neo4j_uri,
            auth=(s.neo4j_user, s.neo4j_password.get_secret_value()),
            max_connection_pool_size=s.neo4j_max_pool_size,
            connection_acquisition_timeout=min(10.0, s.search_timeout_s / 2),
            connection_timeout=min(5.0, s.search_timeout_s / 4),
            max_transaction_retry_time=0.0,
            initial_retry_delay=0.05,
            # As the primary's driver (QUIET): each model check logged six notices.
            notifications_disabled_classifications=QUIET,
        )
        return Neo4jStore(s, driver=driver, one_try_reads=True)

    def searcher(self, relay: BackupCandidates | None = None) -> Searcher:
        """Neo4j, else Qdrant: searched here when it is a server, else through ``relay`` to the
        process that owns the embedded folder (no other may open it)."""
        embedder = self.embedder
        backup = (
            relay
            if self.qdrant.embedded
            else VectorBackup(self.vectors(embedder.model_name, embedder.dimension))
        )
        return Searcher(self.search_graph, embedder, self.settings, backup)

    def close(self) -> None:
        """Closes what was opened; parts never used are not made now."""
        opened = self.__dict__
        if "graph" in opened:
            self.graph.close()
        if "search_graph" in opened:
            self.search_graph.close()
        if "qdrant" in opened:
            self.qdrant.close()
        if "redis" in opened:
            self.redis.close()
