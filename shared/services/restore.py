"""``engram restore``: the primary rebuilt from its backup, or the backup from the primary.

From Qdrant (or a file ``engram backup`` wrote) to Neo4j: the points are indexed by document
(payload only), then written a batch of documents at a time through the store's own write path
(``GraphStore.write_documents``), so Document nodes, ``HAS_CHUNK``, ``NEXT`` and whatever else
the write derives from a Memory are derived again; the moments the write cannot know
(``ingested_at``, ``updated_at``) and the status are set from the payload after, and each Memory
whose point matches is marked ``synced``. A document Neo4j holds at a newer version is left as it
is (the write is guarded by the version). A point that cannot be read is reported with the reason.

From Neo4j to Qdrant (``--to qdrant``, also ``--migrate-payloads``): every Memory synced again by
the syncer, which writes the whole payload (old points gain the document fields a restore needs).

Both are idempotent and resumable: a checkpoint in Neo4j holds the last document (or Memory)
done; a run that finds one unfinished for the same direction and tenant goes on after it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field, ValidationError

from shared.errors import ConfigurationError
from shared.ids import content_hash, document_key
from shared.models import ChunkRecord, DocumentIn, Memory, StagedDocument
from shared.services.guard import PrimaryStore
from shared.services.key_backup import KeyRows, bring_back
from shared.services.sync import Syncer
from shared.stores.base import DocumentWrite, GraphStore, VectorPoint

log = logging.getLogger(__name__)

Direction = Literal["neo4j", "qdrant"]
INDEX_FIELDS = ("document_key", "document_id", "user_id", "version", "chunk_index")
MAX_LISTED = 100
INDEX_PAGE = 2048


class Unreadable(BaseModel):
    id: str
    reason: str


class RestoreReport(BaseModel):
    to: Direction
    source: str = Field(description="The collection, the file, or neo4j.")
    tenant: str | None = None
    dry_run: bool = False
    resumed_after: str | None = Field(None, description="The checkpoint this run went on from.")
    points: int = Field(0, description="Points (or Memories, to Qdrant) looked at.")
    documents: int = 0
    restored_documents: int = 0
    restored: int = Field(0, description="Memories written (to Neo4j) or synced (to Qdrant).")
    synced: int = Field(
        0, description="Restored Memories marked synced: their point matches (pending from a file)."
    )
    skipped_newer: int = Field(0, description="Memories left alone: Neo4j holds a newer version.")
    superseded_points: int = Field(0, description="Points of a document's older version, not restored.")
    incomplete_documents: int = Field(0, description="Documents restored without some of their chunks.")
    unreadable_count: int = 0
    unreadable: list[Unreadable] = Field(default_factory=list, description=f"The first {MAX_LISTED}.")
    failed: int = Field(0, description="Memories the sync to Qdrant could not write (to Qdrant).")
    store_id: str | None = Field(None, description="The primary's store id after the restore.")
    keys: int = Field(0, description="API keys the backup held, merged back into the primary.")
    seconds: float = 0.0
    error: str | None = None

    def unreadable_point(self, point_id: str, reason: str) -> None:
        self.unreadable_count += 1
        if len(self.unreadable) < MAX_LISTED:
            self.unreadable.append(Unreadable(id=point_id, reason=reason))


class PointSource(Protocol):
    """Where a restore to Neo4j reads points from: a Qdrant collection, or a backup file."""

    name: str
    is_backup: bool
    """The points are Qdrant's own: a Memory restored from one is ``synced``, else ``pending``."""

    def index(self, tenant: str | None) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every point's id and its ``INDEX_FIELDS``."""
        ...

    def read(self, ids: Sequence[str]) -> list[VectorPoint]: ...

    def identity(self) -> str | None: ...

    def count(self) -> int: ...

    def backed_up_keys(self) -> list[dict[str, Any]]:
        """The API key rows kept with the backup (shared/services/key_backup.py)."""
        ...


class Checkpoints(Protocol):
    def restore_state(self, name: str) -> dict[str, Any] | None: ...

    def save_restore_state(self, name: str, **state: Any) -> None: ...

    def restore_moments(self, rows: list[dict[str, Any]]) -> None: ...

    def memory_ids(self, after: str | None, tenant: str | None, limit: int) -> list[str]: ...


class RestoreGraph(GraphStore, PrimaryStore, Checkpoints, Protocol):
    """What a restore needs of Neo4j."""

    def bootstrap(self, model: str, dimension: int, timeout_s: int = 300) -> None:
        """The schema, the store id and the model claim, made now (a wiped store has none, and a
        process that made them before the wipe would not make them again)."""
        ...

    def missing_schema(self) -> list[str]:
        """The constraints and indexes the database lacks: a restore writes nothing without them."""
        ...


Progress = Callable[[RestoreReport, int], None]
"""Called after each batch with the report so far and the total to do."""


@dataclass(slots=True)
class _Document:
    key: str
    version: int = 0
    points: dict[int, str] = field(default_factory=dict)  # chunk index -> point id


def checkpoint_name(to: Direction) -> str:
    return f"restore:{to}"


class Restorer:
    def __init__(
        self,
        graph: RestoreGraph,
        clock: Callable[[], datetime],
        batch_documents: int,
        min_share: float,
        keys: KeyRows | None = None,
    ) -> None:
        self._graph = graph
        self._keys = keys
        self._clock = clock
        self._batch = batch_documents
        self._min_share = min_share
        self._bootstrapped: set[tuple[str, int]] = set()

    # Qdrant (or a file) to Neo4j.

    def to_neo4j(
        self,
        source: PointSource,
        tenant: str | None = None,
        dry_run: bool = False,
        fresh: bool = False,
        progress: Progress | None = None,
    ) -> RestoreReport:
        started = time.monotonic()
        report = RestoreReport(to="neo4j", source=source.name, tenant=tenant, dry_run=dry_run)
        self._bootstrapped = set()
        documents = self._index(source, tenant, report)
        report.documents = len(documents)
        keys = sorted(documents)
        name = checkpoint_name("neo4j")
        cursor = None if fresh or dry_run else self._resume_cursor(name, tenant)
        report.resumed_after = cursor
        todo = [key for key in keys if cursor is None or key > cursor]
        total = sum(len(documents[k].points) for k in todo)
        if not dry_run:
            self._save(name, "running", cursor, tenant, report, total, started_at=self._clock())
        for start in range(0, len(todo), self._batch):
            batch = [documents[key] for key in todo[start : start + self._batch]]
            if dry_run:
                self._count_newer(batch, report)
            else:
                self._write_batch(source, batch, report)
                self._save(name, "running", batch[-1].key, tenant, report, total)
            if progress is not None:
                progress(report, total)
        if not dry_run:
            report.store_id = self._settle_identity(source, tenant)
            if self._keys is not None and tenant is None:
                report.keys = bring_back(self._keys, source.backed_up_keys())
        report.seconds = round(time.monotonic() - started, 2)
        if not dry_run:
            self._save(name, "done", None, tenant, report, total)
        return report

    def _index(self, source: PointSource, tenant: str | None, report: RestoreReport) -> dict[str, _Document]:
        documents: dict[str, _Document] = {}
        for point_id, payload in source.index(tenant):
            report.points += 1
            key, version, index = (
                payload.get("document_key"),
                payload.get("version"),
                payload.get("chunk_index"),
            )
            if (
                not isinstance(key, str)
                or not key
                or not isinstance(version, int)
                or not isinstance(index, int)
            ):
                report.unreadable_point(point_id, "payload lacks document_key, version or chunk_index")
                continue
            doc = documents.setdefault(key, _Document(key))
            if version < doc.version:
                report.superseded_points += 1
                continue
            if version > doc.version:
                report.superseded_points += len(doc.points)
                doc.version, doc.points = version, {}
            if index in doc.points:
                report.unreadable_point(point_id, f"a second point for chunk {index} of its document")
                continue
            doc.points[index] = point_id
        return {key: doc for key, doc in documents.items() if doc.points}

    def _count_newer(self, batch: list[_Document], report: RestoreReport) -> None:
        versions = {pid: doc.version for doc in batch for pid in doc.points.values()}
        live = self._graph.live_versions(list(versions))
        newer = sum(1 for pid, version in versions.items() if live.get(pid, -1) > version)
        report.skipped_newer += newer
        report.restored += len(versions) - newer

    def _write_batch(self, source: PointSource, batch: list[_Document], report: RestoreReport) -> None:
        points = {p.id: p for p in source.read([pid for doc in batch for pid in doc.points.values()])}
        writes: list[DocumentWrite] = []
        moments: list[dict[str, Any]] = []
        for doc in batch:
            built = self._document(doc, points, report)
            if built is not None:
                writes.append(built[0])
                moments.append(built[1])
        if not writes:
            return
        for model, dimension in {(w.model, len(w.vectors[0])) for w in writes} - self._bootstrapped:
            self._graph.bootstrap(model, dimension)
            missing = self._graph.missing_schema()
            if missing:
                # Without the uniqueness constraints every MERGE scans: a restore of 10,000
                # memories slowed to 4 a second, and nothing would guard uniqueness after it.
                raise ConfigurationError(
                    f"Neo4j lacks {', '.join(missing)} after the schema was made: the restore "
                    "writes nothing without them (see Neo4j's log, then run engram restore again)"
                )
            self._bootstrapped.add((model, dimension))
        outcome = self._graph.write_documents(writes)
        written = set(outcome.written)
        by_key = {w.staged.key: w for w in writes}
        for key in outcome.stale:
            report.skipped_newer += len(by_key[key].staged.chunks)
        self._graph.restore_moments([m for m in moments if m["key"] in written])
        versions = {
            chunk.id: by_key[key].staged.version for key in written for chunk in by_key[key].staged.chunks
        }
        report.restored_documents += len(written)
        report.restored += len(versions)
        if source.is_backup:
            report.synced += len(self._graph.mark_synced(versions))

    def _document(
        self, doc: _Document, points: dict[str, VectorPoint], report: RestoreReport
    ) -> tuple[DocumentWrite, dict[str, Any]] | None:
        """The document as the write stage hands it to the store, from its points; None (and the
        points reported) when they cannot be read."""
        memories: list[tuple[Memory, VectorPoint]] = []
        for index in sorted(doc.points):
            point_id = doc.points[index]
            point = points.get(point_id)
            if point is None:
                report.unreadable_point(point_id, "gone from the backup while restoring")
                continue
            try:
                memory = Memory.model_validate(point.payload)
            except ValidationError as exc:
                problem = exc.errors()[0]
                where = ".".join(str(part) for part in problem["loc"])
                report.unreadable_point(point_id, f"payload field {where}: {problem['msg']}")
                continue
            if len(point.vector) != memory.embedding_dim or not point.vector:
                report.unreadable_point(
                    point_id, f"vector of {len(point.vector)} dimensions, payload says {memory.embedding_dim}"
                )
                continue
            memories.append((memory, point))
        if not memories:
            return None
        first, first_point = memories[0]
        if document_key(first.user_id, first.document_id) != doc.key:
            for _, point in memories:
                report.unreadable_point(
                    point.id, "document_key is not the key of its user_id and document_id"
                )
            return None
        extra = first_point.payload.get("document")
        document: dict[str, Any] = extra if isinstance(extra, dict) else {}
        chunk_count = document.get("chunk_count")
        if isinstance(chunk_count, int) and chunk_count > len(memories):
            report.incomplete_documents += 1
        try:
            metadata = json.loads(document["metadata"]) if isinstance(document.get("metadata"), str) else {}
            given = document.get("created_at")
            incoming = DocumentIn(
                user_id=first.user_id,
                id=first.document_id,
                text="\n".join(memory.content for memory, _ in memories),
                project_id=first.project_id,
                session_id=first.session_id,
                title=first.title,
                source=document.get("source"),
                uri=document.get("uri"),
                memory_type=first.memory_type,
                tags=first.tags,
                importance=first.importance,
                confidence=first.confidence,
                metadata=metadata,
                created_at=given if isinstance(given, str) else first.created_at,
                position=first.position,
            )
        except (ValidationError, ValueError) as exc:
            for _, point in memories:
                report.unreadable_point(
                    point.id, f"its document cannot be rebuilt: {str(exc).splitlines()[0]}"
                )
            return None
        staged = StagedDocument(
            document=incoming,
            key=doc.key,
            version=doc.version,
            content_hash=str(document.get("content_hash") or content_hash(incoming.text)),
            received_at=first.created_at,
            chunks=[
                ChunkRecord(
                    id=point.id,
                    chunk_index=memory.chunk_index,
                    content=memory.content,
                    content_hash=memory.content_hash,
                    token_count=memory.token_count,
                )
                for memory, point in memories
            ],
        )
        write = DocumentWrite(
            staged=staged, vectors=[list(point.vector) for _, point in memories], model=first.embedding_model
        )
        moment = {
            "key": doc.key,
            "version": doc.version,
            "ingested_at": _moment(document.get("ingested_at")),
            # The fields the document was written from, hashed: an unchanged re-ingest after the
            # restore is then skipped as before the loss (the rebuilt DocumentIn's would differ).
            "fingerprint": _moment(document.get("fingerprint")),
            "memories": [
                {
                    "id": point.id,
                    "updated_at": _moment(point.payload.get("updated_at")),
                    "created_at": _moment(point.payload.get("created_at")),
                    "status": memory.status,
                }
                for memory, point in memories
            ],
        }
        return write, moment

    def _settle_identity(self, source: PointSource, tenant: str | None) -> str | None:
        """The restored primary takes the backup's store id once it holds (most of) what the
        backup holds, so the reconciler finds the two in step again."""
        recorded = source.identity()
        me = self._graph.identity()
        points = source.count()
        if recorded is not None and recorded != me.store_id and me.memories >= self._min_share * points:
            self._graph.adopt_identity(recorded)
            log.info("restore: Neo4j adopted store id %s of the backup", recorded)
            me = self._graph.identity()
        if me.memories >= self._min_share * points and tenant is None:
            self._graph.record_primary(None, points)
        return me.store_id

    # Neo4j to Qdrant.

    def to_qdrant(
        self,
        syncer: Syncer,
        tenant: str | None = None,
        dry_run: bool = False,
        fresh: bool = False,
        page: int = 256,
        progress: Progress | None = None,
    ) -> RestoreReport:
        started = time.monotonic()
        report = RestoreReport(to="qdrant", source="neo4j", tenant=tenant, dry_run=dry_run)
        name = checkpoint_name("qdrant")
        cursor = None if fresh or dry_run else self._resume_cursor(name, tenant)
        report.resumed_after = cursor
        total = self._graph.identity().memories
        if not dry_run:
            self._save(name, "running", cursor, tenant, report, total, started_at=self._clock())
        after = cursor
        while True:
            ids = self._graph.memory_ids(after, tenant, page)
            if not ids:
                break
            after = ids[-1]
            report.points += len(ids)
            if not dry_run:
                outcome = syncer.sync(ids)
                report.restored += outcome.synced
                report.synced += outcome.synced
                report.failed += outcome.failed
                if outcome.error and not outcome.permanent:
                    report.error = outcome.error
                    self._save(name, "interrupted", cursor, tenant, report, total)
                    break
                cursor = after
                self._save(name, "running", cursor, tenant, report, total)
            if progress is not None:
                progress(report, total)
        report.seconds = round(time.monotonic() - started, 2)
        report.store_id = self._graph.identity().store_id
        if not dry_run and report.error is None:
            self._save(name, "done", None, tenant, report, total)
        return report

    # The checkpoint.

    def _resume_cursor(self, name: str, tenant: str | None) -> str | None:
        state = self._graph.restore_state(name)
        if state is None or state.get("state") not in ("running", "interrupted"):
            return None
        if state.get("tenant") != tenant:
            return None
        cursor = state.get("cursor")
        return cursor if isinstance(cursor, str) else None

    def _save(
        self,
        name: str,
        state: str,
        cursor: str | None,
        tenant: str | None,
        report: RestoreReport,
        total: int,
        started_at: datetime | None = None,
    ) -> None:
        self._graph.save_restore_state(
            name,
            state=state,
            cursor=cursor,
            tenant=tenant,
            report=report.model_dump_json(),
            total=total,
            done=report.restored + report.skipped_newer + report.unreadable_count,
            started_at=started_at,
            now=self._clock(),
        )


def _moment(value: Any) -> str | None:
    return value if isinstance(value, str) else None
