"""The broker client's operations for the store's keeper: API keys, the reconciler, a restore,
a model migration (re-embedding), and the graph's backfill."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import celery.exceptions
import celery.result

from producers.client.base import ClientBase, queue_errors
from shared.auth import NewKey, make_key, new_signing_secret
from shared.confusables import refuse_look_alike
from shared.errors import InvalidInput, SearchTimeout
from shared.graph.models import BackfillReport
from shared.models import utc_now
from shared.redis_client import translated_errors
from shared.services.reembed import Progress as ReembedProgress
from shared.services.reembed import Reembed, ShowProgress
from shared.services.restore_lock import RestoreLock
from shared.stores.base import EmbeddingTarget, MigrationState
from shared.stores.neo4j_keys import Neo4jKeyStore
from workers.app import DROP_COLLECTION_TASK, RECONCILE_TASK, REEMBED_TASK, RESTORE_TASK


class Admin(ClientBase):
    # API keys (shared/auth.py), kept in Neo4j.

    def key_store(self) -> Neo4jKeyStore:
        return self._container.key_store()

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

    # Reconciliation, through its queue.

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
        return self._container.restore_lock()

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

    # The derived graph.

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
