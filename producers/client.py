"""The client for apps: enqueue documents, search through the query queue, read status.

Everything a producer does goes through here, so the HTTP app, the CLI and an app embedding this
module enforce the same limits and speak to the queues the same way.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import celery.exceptions
import celery.result
import kombu.exceptions
import redis
from celery import Celery

from shared.auth import NewKey, make_key, new_signing_secret
from shared.confusables import refuse_look_alike
from shared.errors import (
    DocumentTooLarge,
    DuplicateDocument,
    InvalidInput,
    SearchTimeout,
    ServiceUnavailable,
    TransientError,
)
from shared.graph.models import BackfillReport, EntityDetail, EntityPage
from shared.ids import document_key
from shared.ledger import Ledger
from shared.models import (
    DeleteResult,
    DocumentIn,
    DocumentStatus,
    IngestAccepted,
    MemoryPage,
    MemoryRecord,
    SearchFilters,
    SearchRequest,
    SearchResponse,
    TenantOverview,
    VectorSyncCounts,
    utc_now,
)
from shared.progress import Progress, ProgressRecord
from shared.redis_client import START_HINT, connect, out_of_memory, out_of_memory_in, translated_errors
from shared.sealing import SecretBox, box_for
from shared.services import census
from shared.services.incremental import Change, classify_all
from shared.services.lifecycle import Lifecycle
from shared.services.reembed import Progress as ReembedProgress
from shared.services.reembed import Reembed, ShowProgress
from shared.services.refs import DocRef
from shared.services.replay import Replay, ReplayReport, Stage
from shared.services.restore_lock import RestoreLock
from shared.settings import Settings, get_settings
from shared.staging import Staging
from shared.stores.base import EmbeddingTarget, MigrationState
from shared.stores.neo4j import Neo4jStore
from shared.stores.neo4j_entities import Neo4jEntities
from shared.stores.neo4j_incremental import Neo4jIncremental, StoredState
from shared.stores.neo4j_keys import Neo4jKeyStore
from shared.versions import VersionClock
from workers import fair_share
from workers.app import (
    CHUNK_TASK,
    DROP_COLLECTION_TASK,
    EMBED_TASK,
    QUEUES,
    RECONCILE_TASK,
    REEMBED_TASK,
    RESTORE_TASK,
    SEARCH_SHOWN,
    SEARCH_TASK,
    SYNC_TASK,
    WRITE_TASK,
    send_stage,
)
from workers.app import app as default_app

log = logging.getLogger(__name__)

FINAL_STATES = frozenset({"done", "failed", "unchanged"})
"""States a document keeps at its version once reached (a replay of a failed one is a new wait)."""


def check_document(document: DocumentIn, settings: Settings) -> None:
    refuse_look_alike(document.user_id, settings.allow_lookalike_tenants)
    size = len(document.text.encode("utf-8"))
    if size > settings.max_document_bytes:
        raise DocumentTooLarge(
            f"document {document.document_id!r} is {size} bytes; the limit is "
            f"{settings.max_document_bytes} (ENGRAM_MAX_DOCUMENT_BYTES)"
        )


def batches(
    documents: Sequence[DocumentIn], max_documents: int, max_bytes: int
) -> Iterator[list[DocumentIn]]:
    """Groups documents for one ingest task each: few enough to keep a task short."""
    batch: list[DocumentIn] = []
    size = 0
    for document in documents:
        length = len(document.text.encode("utf-8"))
        if batch and (len(batch) >= max_documents or size + length > max_bytes):
            yield batch
            batch, size = [], 0
        batch.append(document)
        size += length
    if batch:
        yield batch


@contextmanager
def queue_errors() -> Iterator[None]:
    """Broker and result-store failures, in whatever form Celery raises them, as one clear error."""
    try:
        yield
    except (kombu.exceptions.OperationalError, redis.ConnectionError, redis.TimeoutError) as exc:
        full = out_of_memory_in(exc)
        raise (out_of_memory(full) if full else ServiceUnavailable("redis", str(exc), START_HINT)) from exc
    except redis.OutOfMemoryError as exc:
        raise out_of_memory(exc) from exc
    except RuntimeError as exc:
        # Celery's result consumer gives up on a lost Redis with a bare RuntimeError.
        if isinstance(exc.__cause__, redis.ConnectionError | redis.TimeoutError | OSError):
            raise ServiceUnavailable("redis", str(exc.__cause__), START_HINT) from exc
        raise


class EngramClient:
    def __init__(self, settings: Settings | None = None, app: Celery | None = None) -> None:
        self.settings = settings or get_settings()
        self._app = app or default_app
        self._redis = connect(self.settings)
        self._progress = Progress(self._redis, self.settings.staging_ttl_s)
        self._versions = VersionClock(self._redis)
        self._ledger = Ledger(self._redis)
        self._neo4j: Neo4jStore | None = None
        self._box: SecretBox | None = None

    def close(self) -> None:
        if self._neo4j is not None:
            self._neo4j.close()
        self._redis.close()

    def ping(self) -> None:
        with translated_errors():
            self._redis.ping()

    # Ingestion.

    def ingest(
        self, documents: Sequence[DocumentIn], batch_documents: int | None = None, force: bool = False
    ) -> IngestAccepted:
        """Checks every document first, so a bad one enqueues nothing, then enqueues in batches,
        every document at one new version. A document stored exactly as given is not enqueued
        (``unchanged``) unless ``force``."""
        if not documents:
            raise InvalidInput("no documents given")
        self.ping()
        seen: set[str] = set()
        for document in documents:
            check_document(document, self.settings)
            key = document_key(document.user_id, document.document_id)
            if key in seen:
                raise DuplicateDocument(f"document {document.document_id!r} appears twice in one request")
            seen.add(key)
        unchanged = {} if force else self._unchanged(documents)
        version = self._versions.next()
        size = batch_documents or self.settings.ingest_batch_documents
        task_ids: list[str] = []
        sent = 0
        todo = [d for d in documents if document_key(d.user_id, d.document_id) not in unchanged]
        skipped = [d.document_id for d in documents if document_key(d.user_id, d.document_id) in unchanged]
        for batch in batches(todo, size, max(self.settings.max_document_bytes, 256_000)):
            payload = [{**d.model_dump(mode="json", exclude_none=True), "version": version} for d in batch]
            if force:  # every stage redoes its work: the embed stage reuses no stored vector
                payload = [{**fields, "force": True} for fields in payload]
            try:
                with queue_errors():
                    task_ids.append(send_stage(self._app, self._ledger, CHUNK_TASK, (payload,)))
            except ServiceUnavailable as exc:
                raise ServiceUnavailable(
                    "redis", f"enqueued {sent} of {len(todo)} documents, then: {exc.detail}", exc.hint
                ) from exc
            sent += len(batch)
            # After the send: progress never moves backwards, so a worker already past "queued" stays.
            self._progress.set([(document_key(d.user_id, d.document_id), version) for d in batch], "queued")
            self._progress.name(
                (document_key(d.user_id, d.document_id), d.user_id, d.document_id, version) for d in batch
            )
        # At the stored version: a newer ingestion accepted meanwhile by another producer keeps its record.
        self._progress.set(list(unchanged.items()), "unchanged")
        self._progress.name(
            (key, d.user_id, d.document_id, unchanged[key])
            for d in documents
            if (key := document_key(d.user_id, d.document_id)) in unchanged
        )
        return IngestAccepted(
            accepted=len(documents),
            version=version,
            document_ids=[d.document_id for d in documents],
            task_ids=task_ids,
            unchanged=skipped,
        )

    def changes(self, documents: Sequence[DocumentIn]) -> tuple[list[Change], dict[str, StoredState]]:
        """Whether each document is new, changed or stored exactly as given (for this tenant), and
        the stored state of those stored, by document key."""
        keys = [document_key(d.user_id, d.document_id) for d in documents]
        stored: dict[str, StoredState] = {}
        for start in range(0, len(keys), 1000):
            stored.update(Neo4jIncremental(self._store()).stored_states(keys[start : start + 1000]))
        records = self._progress.records(keys)
        return classify_all(documents, keys, stored, records, self.settings.embedding_model), stored

    def _unchanged(self, documents: Sequence[DocumentIn]) -> dict[str, int]:
        """The keys of documents stored exactly as given, with their stored version. Neo4j out of
        reach skips nothing: every document is enqueued, to be written once it is back."""
        try:
            changes, stored = self.changes(documents)
        except TransientError as exc:
            if isinstance(exc, ServiceUnavailable) and exc.service == "redis":
                raise
            log.warning("stored documents unreadable (%s); enqueueing every document", exc)
            return {}
        found: dict[str, int] = {}
        for document, change in zip(documents, changes, strict=True):
            if change == "unchanged":
                key = document_key(document.user_id, document.document_id)
                found[key] = stored[key].version
        return found

    def states(self, documents: Sequence[DocRef]) -> Counter[str]:
        """How many of these (key, version) are in each state: for progress over a bulk load. A
        record of a newer version counts as done (this one is superseded), of an older one as queued
        unless it says the document was found unchanged (so never enqueued)."""
        return self.progress_of(documents)[0]

    def progress_of(self, documents: Sequence[DocRef]) -> tuple[Counter[str], list[DocRef]]:
        """``states``, and those of the documents not finished yet: done, failed and unchanged
        are final at a version, so a wait polls only the rest (``producers/waiting.py``)."""
        counts: Counter[str] = Counter()
        unfinished: list[DocRef] = []
        for ref, record in zip(documents, self._progress.records(k for k, _ in documents), strict=True):
            version = ref[1]
            if record is None:
                state = "unknown"
            elif record.state == "unchanged":  # found stored as given: not enqueued at this version
                state = "unchanged"
            elif record.version > version:
                state = "done"
            elif record.version < version:
                state = "queued"
            else:
                state = record.state
            counts[state] += 1
            if state not in FINAL_STATES:
                unfinished.append(ref)
        return counts, unfinished

    def chunk_work(self, documents: Sequence[DocRef]) -> tuple[int, int]:
        """(Chunks reused, chunks embedded) of these (key, version), as the embed stage recorded them."""
        reused = embedded = 0
        for (_, version), record in zip(
            documents, self._progress.records(k for k, _ in documents), strict=True
        ):
            if record is not None and record.version == version:
                reused += record.reused or 0
                embedded += record.embedded or 0
        return reused, embedded

    def source_documents(self, user_id: str, source: str) -> list[str]:
        """The ids of the tenant's stored documents whose source is ``source``."""
        return Neo4jIncremental(self._store()).source_documents(user_id, source)

    def stored_documents(self, keys: Sequence[str]) -> int:
        """How many of these documents Neo4j holds."""
        return self._store().stored_documents(keys)

    def chunk_count(self, keys: Sequence[str]) -> int:
        """Chunks stored for these documents."""
        return self._store().chunk_count(keys)

    def status(self, user_id: str, document_id: str) -> DocumentStatus:
        key = document_key(user_id, document_id)
        progress = self._progress.get(key)
        stored = self._store().document_status(key)
        status = DocumentStatus(document_id=document_id, user_id=user_id, state="unknown")
        if progress is not None:
            status.state, status.error, status.updated_at = (
                progress.state,
                progress.error,
                progress.updated_at,
            )
            status.version = progress.version
            status.chunks_reused, status.chunks_embedded = progress.reused, progress.embedded
        if stored is not None:
            stored_version = int(stored["version"] or 0)
            # Neo4j alone says "done" only for a record gone (expired) or about an older ingestion:
            # for the same version, the write stage says done once Qdrant was tried too.
            if progress is None or stored_version > progress.version:
                status.state, status.updated_at, status.version = (
                    "done",
                    stored["ingested_at"],
                    stored_version,
                )
                status.chunks_reused = status.chunks_embedded = None
            status.chunks = stored["chunks"]
            status.vector_sync = VectorSyncCounts(
                pending=stored["pending"], synced=stored["synced"], failed=stored["failed"]
            )
        return status

    # The memory lifecycle (shared/services/lifecycle.py).

    def get_memory(self, user_id: str, memory_id: str) -> MemoryRecord | None:
        return self._lifecycle().get_memory(user_id, memory_id)

    def list_memories(
        self, user_id: str, filters: SearchFilters | None = None, limit: int = 100, cursor: str | None = None
    ) -> MemoryPage:
        return self._lifecycle().list_memories(user_id, filters or SearchFilters(), limit, cursor)

    def delete_document(self, user_id: str, document_id: str) -> DeleteResult:
        """Gone from Neo4j, and so from search, at once; from Qdrant through the write queue."""
        self.ping()
        result = self._lifecycle().delete_document(user_id, document_id)
        if result.memories:
            self._progress.set([(document_key(user_id, document_id), result.version)], "deleted")
        return result

    def delete_memory(self, user_id: str, memory_id: str) -> DeleteResult:
        self.ping()
        return self._lifecycle().delete_memory(user_id, memory_id)

    def delete_where(self, user_id: str, filters: SearchFilters, everything: bool = False) -> DeleteResult:
        self.ping()
        return self._lifecycle().delete_where(user_id, filters, everything)

    # The entity graph (shared/graph, shared/stores/neo4j_entities.py).

    def list_entities(
        self,
        user_id: str,
        prefix: str | None = None,
        text: str | None = None,
        kind: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> EntityPage:
        return Neo4jEntities(self._store()).list_entities(user_id, prefix, text, kind, limit, offset)

    def get_entity(self, user_id: str, name: str) -> EntityDetail | None:
        return Neo4jEntities(self._store()).get_entity(user_id, name)

    def graph_backfill(
        self, user_id: str | None = None, page: int = 500, done: Callable[[int], None] | None = None
    ) -> BackfillReport:
        """Derives sessions, turn order and entities of every Memory (of one tenant) from its own
        fields, a page at a time: for Memories written before the graph, or restored. Idempotent."""
        store = self._store()
        after: str | None = None
        total = 0
        while ids := store.memory_ids_page(user_id, after, page):
            total += store.derive_graph(ids)
            after = ids[-1]
            if done is not None:
                done(len(ids))
        return BackfillReport(memories=total)

    def replay(self, user_id: str | None = None, document_ids: Sequence[str] = ()) -> ReplayReport:
        """Re-drives failed documents (these, or every failed one) from what is staged."""
        self.ping()
        if document_ids:
            if user_id is None:
                raise InvalidInput("replaying named documents needs their tenant")
            keys = [document_key(user_id, d) for d in document_ids]
            found = {
                k: r
                for k, r in zip(keys, self._progress.records(keys), strict=True)
                if r and r.state == "failed"
            }
        else:
            found = self._progress.failed()
        return Replay(
            Staging(self._redis, self.settings.staging_ttl_s), self._progress, self._send_stage
        ).run(found)

    def _send_stage(self, stage: Stage, batch_id: str, documents: list[DocRef]) -> None:
        with queue_errors():
            name = WRITE_TASK if stage == "write" else EMBED_TASK
            send_stage(self._app, self._ledger, name, (batch_id,), {"documents": documents})

    def _lifecycle(self) -> Lifecycle:
        return Lifecycle(self._store(), self._versions.next, self._sync_removed)

    def _sync_removed(self, ids: Sequence[str]) -> bool:
        """Asks the process that owns Qdrant to drop these points; True once it confirmed."""
        with queue_errors():
            answer = self._app.send_task(SYNC_TASK, args=(list(ids),))
            try:
                outcome: dict[str, Any] = answer.get(
                    timeout=self.settings.delete_confirm_timeout_s, propagate=True
                )
            except celery.exceptions.TimeoutError:
                return False
            finally:
                answer.forget()
        return not outcome.get("error")

    def recent_ingestions(self, user_id: str | None, limit: int = 50) -> list[ProgressRecord]:
        """The newest ingestions and where each is: a tenant's, or every tenant's (None)."""
        return self._progress.recent(user_id, limit)

    def failures(self, user_id: str | None, limit: int = 50) -> list[ProgressRecord]:
        """Documents recorded failed, newest first: a tenant's, or every tenant's (None), from
        the failure index (shared/progress.py), not a scan."""
        return self._progress.failures(user_id, limit)

    def queue_depths(self) -> dict[str, int]:
        with translated_errors():
            return fair_share.queue_lengths(self._redis, QUEUES)

    def document_states(self) -> dict[str, int]:
        """Documents with a progress record, by state (Redis alone)."""
        return self._progress.count_states()

    def overview(self) -> dict[str, Any]:
        """Queue lengths, the vector_sync counts and sync health of the whole store, and the
        reconciler's last pass."""
        with translated_errors():
            queues = fair_share.queue_lengths(self._redis, QUEUES)
        store = self._store()
        health = store.sync_health(utc_now())
        last = store.last_reconcile()
        return {
            "queues": queues,
            "stores": self.stores(),
            "vector_sync": health.counts.model_dump(),
            "sync_health": {
                "tombstones": health.tombstones,
                "oldest_pending": health.oldest_pending,
                "retry_due": health.retry_due,
                "last_reconcile": json.loads(last[0]) if last else None,
            },
        }

    def stores(self) -> dict[str, Any]:
        """Memories in Neo4j beside points in Qdrant (counted now with a server; as the last
        reconcile pass counted them when embedded, as only its owner may open the folder), and
        whether the reconciler found the primary lost."""
        identity = self._store().identity()
        points: int | None = identity.qdrant_points
        counted_at = identity.checked_at
        stored = self._store().stored_model()
        if self.settings.qdrant_url is not None and stored is not None:
            from shared.stores.vectors import connect_vectors

            connection = connect_vectors(self.settings)
            try:
                points, counted_at = connection.store(*stored).count(), utc_now()
            finally:
                connection.close()
        # The owner's last census (Redis): a primary wiped since is told now, not after a pass.
        with translated_errors():
            kept = census.load(self._redis)
        if points is None and kept is not None:
            points, counted_at = kept.points, datetime.fromisoformat(kept.counted_at)
        share = self.settings.reconcile_min_primary_share
        lost = identity.primary_lost or census.looks_lost(kept, identity.memories, identity.store_id, share)
        return {
            "neo4j_memories": identity.memories,
            "qdrant_points": points,
            "qdrant_points_counted_at": counted_at,
            "store_id": identity.store_id,
            "primary_lost": lost,
        }

    def tenant_overview(self, user_id: str) -> TenantOverview:
        """One tenant's documents and memories, and how far Qdrant has them."""
        return self._store().tenant_overview(user_id)

    # API keys (shared/auth.py), kept in Neo4j.

    def key_store(self) -> Neo4jKeyStore:
        if self._box is None:
            self._box = box_for(self.settings)
        return Neo4jKeyStore(self._store(), self._box)

    def rotate_signing_secret(self, key_id: str) -> str:
        """A new signing secret for the live key ``key_id``, shown once; the old one stops
        signing within ENGRAM_AUTH_CACHE_S."""
        secret = new_signing_secret()
        if not self.key_store().rotate_signing_secret(key_id, secret):
            raise InvalidInput(f"no live key {key_id!r}")
        return secret

    def create_key(self, name: str, tenant: str | None, signing: bool = False) -> NewKey:
        if tenant is not None:
            refuse_look_alike(tenant, self.settings.allow_lookalike_tenants)
        stored, shown = make_key(name, "tenant" if tenant else "admin", tenant, signing, utc_now())
        self.key_store().add_key(stored)
        return shown

    def first_seen(self, token: str, ttl_s: float) -> bool:
        """True the first time ``token`` is seen within ``ttl_s`` (a signed webhook's replay guard)."""
        with translated_errors():
            return bool(self._redis.set(f"engram:webhook:seen:{token}", 1, nx=True, ex=max(1, int(ttl_s))))

    # Search and reconciliation, through their queues.

    def search(self, request: SearchRequest, timeout_s: float | None = None) -> SearchResponse:
        timeout = timeout_s or self.settings.search_timeout_s
        self.ping()  # fails at once with a clear line, where Celery would retry for long
        with queue_errors():
            result = self._app.send_task(
                SEARCH_TASK, args=(request.model_dump(mode="json"),), expires=timeout, **SEARCH_SHOWN
            )
            try:
                answer = result.get(timeout=timeout, propagate=True)
            except celery.exceptions.TimeoutError as exc:
                result.revoke()
                raise SearchTimeout(f"no query worker answered within {timeout:g} s") from exc
            finally:
                result.forget()
        return SearchResponse.model_validate(answer)

    def reconcile(
        self, dry_run: bool = False, timeout_s: float | None = 600.0, force: bool = False
    ) -> dict[str, Any]:
        """Runs the reconciler through its queue; waits for its report unless timeout_s is None."""
        self.ping()
        with queue_errors():
            kwargs = {"dry_run": dry_run, "force": force} if force else {"dry_run": dry_run}
            result = self._app.send_task(RECONCILE_TASK, kwargs=kwargs)
            if timeout_s is None:
                return {"task_id": result.id}
            try:
                report: dict[str, Any] = result.get(timeout=timeout_s, propagate=True)
            except celery.exceptions.TimeoutError as exc:
                raise SearchTimeout(f"the reconciler did not report within {timeout_s:g} s") from exc
        return report

    # engram restore (shared/services/restore.py), run by the process that may open Qdrant.

    def restore_lock(self) -> RestoreLock:
        return RestoreLock(self._redis, self.settings.restore_lock_ttl_s)

    def start_restore(self, **options: Any) -> celery.result.AsyncResult[Any]:
        """Sends a restore to the reconcile queue; its checkpoint shows how far it got.

        One at a time: ``RestoreRunning`` while another holds the lock (a dry run takes none)."""
        self.ping()
        lock = None if options.get("dry_run") else self.restore_lock()
        token = uuid.uuid4().hex
        if lock is not None:
            if not lock.claim(token):
                raise lock.refuse()
            options = {**options, "lock": token}
        try:
            with queue_errors():
                return self._app.send_task(RESTORE_TASK, kwargs=options)
        except BaseException:
            if lock is not None:
                lock.release(token)
            raise

    def restore_state(self, to: str) -> dict[str, Any] | None:
        state = self._store().restore_state(f"restore:{to}")
        if state is not None and state.get("report"):
            state["report"] = json.loads(state["report"])
        return state

    # A model migration (shared/services/reembed.py): this process's settings name the new model.

    def embedding_target(self) -> EmbeddingTarget:
        """The configured model, as a migration's target; its dimension probed if not set."""
        s = self.settings
        dimension = s.embedding_dimension
        if dimension is None:
            from shared.embedding import make_embedder

            dimension = make_embedder(s).dimension
        return EmbeddingTarget(
            model=s.embedding_model,
            dimension=dimension,
            backend=s.embedding_backend,
            url=s.embedding_url,
            max_tokens=s.embedding_max_tokens,
            tokenizer_path=None if s.embedding_tokenizer_path is None else str(s.embedding_tokenizer_path),
            local_model_path=None if s.local_model_path is None else str(s.local_model_path),
        )

    def reembed(
        self, show: ShowProgress, timeout_s: float = 24 * 3600.0, page_size: int | None = None
    ) -> MigrationState:
        """Starts or resumes the migration to the configured model and switches when complete."""
        self.ping()
        return self._reembed(page_size).run(self.embedding_target(), show, timeout_s)

    def reembed_start(self, page_size: int | None = None) -> tuple[MigrationState, int]:
        """Starts or resumes the migration and sends its pages; returns it and the pages sent."""
        self.ping()
        reembed = self._reembed(page_size)
        migration = reembed.start(self.embedding_target())
        return migration, reembed.send_pages(migration) if migration.phase == "running" else 0

    def reembed_progress(self) -> ReembedProgress | None:
        return self._reembed(None).progress()

    def reembed_drop_old(self, timeout_s: float = 120.0) -> tuple[str, int]:
        """Drops the old model's Qdrant collection once the migration is done; returns its model."""
        self.ping()
        migration = self._store().migration()
        if migration is None or migration.phase != "done":
            raise InvalidInput("no finished migration: the old collection is kept until the switch")
        with queue_errors():
            answer = self._app.send_task(DROP_COLLECTION_TASK, args=migration.source)
            try:
                answer.get(timeout=timeout_s, propagate=True)
            except celery.exceptions.TimeoutError as exc:
                raise SearchTimeout(
                    f"the write worker did not drop the collection in {timeout_s:g} s"
                ) from exc
            finally:
                answer.forget()
        self._store().forget_source_model(utc_now())
        return migration.source

    def _reembed(self, page_size: int | None) -> Reembed:
        s = self.settings
        return Reembed(
            self._store(),
            self._send_reembed_page,
            utc_now,
            page_size=page_size or s.reembed_page_size,
            switch_grace_s=s.model_check_interval_s + s.search_timeout_s,
        )

    def _send_reembed_page(self, run: int, ids: list[str]) -> None:
        with queue_errors():
            self._app.send_task(REEMBED_TASK, args=(run, ids))

    def _store(self) -> Neo4jStore:
        if self._neo4j is None:
            self._neo4j = Neo4jStore(self.settings)
        return self._neo4j
