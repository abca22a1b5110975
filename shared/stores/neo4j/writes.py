"""Writes of documents and their chunks, deletes of documents, and the graph derived again for
Memories written before it (a backfill, a restore): each in one transaction, guarded by version."""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import pairwise

from neo4j import ManagedTransaction

from shared.models import Memory, StagedDocument, utc_now
from shared.search.text import TERM_VECTOR_PREFIX, tenant_token, term_vector
from shared.stores.base import DocumentWrite, WriteOutcome
from shared.stores.neo4j import graph_queries as gq
from shared.stores.neo4j import reembed_queries as mq
from shared.stores.neo4j import write_queries as q
from shared.stores.neo4j.connection import Row, translated_errors
from shared.stores.neo4j.graph import GraphSource
from shared.stores.neo4j.schema import SchemaOps, claim_of


class WriteOps(SchemaOps):
    # Ingestion.

    def write_documents(self, writes: Sequence[DocumentWrite]) -> WriteOutcome:
        """Upserts documents and their chunks (``pending``), links them, removes stale chunks:
        one transaction, guarded by each document's version."""
        now = utc_now()
        document_rows: list[Row] = []
        memory_rows: list[Row] = []
        pairs: dict[str, list[list[str]]] = {}
        sources: list[GraphSource] = []
        for write in writes:
            staged = write.staged
            doc = staged.document
            document_rows.append(
                {
                    "key": staged.key,
                    "version": staged.version,
                    "external_id": doc.document_id,
                    "user_id": doc.user_id,
                    "project_id": doc.project_id,
                    "session_id": doc.session_id,
                    "source": doc.source,
                    "title": doc.title,
                    "uri": doc.uri,
                    "content_hash": staged.content_hash,
                    "fingerprint": doc.fingerprint(),
                    "metadata": json.dumps(doc.metadata, sort_keys=True),
                    "chunk_count": len(staged.chunks),
                    "created_at": doc.created_at or staged.received_at,
                    "given_created_at": doc.created_at,
                }
            )
            for chunk, vector in zip(staged.chunks, write.vectors, strict=True):
                embedding = [float(x) for x in vector]
                memory = memory_of(staged, chunk.chunk_index, write.model, len(embedding))
                sources.append(GraphSource(memory.id, memory.user_id, memory.content, memory.session_id))
                properties = memory.model_dump(exclude={"created_at"})
                # Neo4j's own, not in the payload: the terms counted, and the tenant as the index's term.
                properties["term_vector"] = term_vector(memory.content)
                properties["tenant_token"] = tenant_token(memory.user_id)
                memory_rows.append(
                    {
                        "id": chunk.id,
                        "document_key": staged.key,
                        "version": staged.version,
                        "created_at": memory.created_at,
                        "given_created_at": doc.created_at,
                        "embedding": embedding,
                        "properties": properties,
                    }
                )
            ids = [chunk.id for chunk in staged.chunks]
            pairs[staged.key] = [[a, b] for a, b in pairwise(ids)]

        models = {(write.model, len(write.vectors[0])) for write in writes if write.vectors}
        graph = self.graph
        entity_rows = graph.entity_rows(sources)

        def work(tx: ManagedTransaction) -> WriteOutcome:
            # Checked inside the transaction: a migration's switch refuses writes of the old model.
            found = tx.run(mq.MODEL_STATE).single()
            claim = claim_of(found.data() if found is not None else {})
            for model, dimension in models:
                refusal = claim.refuse_write(model, dimension)
                if refusal is not None:
                    raise refusal
            upserted = tx.run(q.UPSERT_DOCUMENTS, documents=document_rows, now=now).data()
            accepted = [r["key"] for r in upserted]
            if not accepted:
                return WriteOutcome(stale=[row["key"] for row in document_rows])
            rows = tx.run(q.UPSERT_MEMORIES, memories=memory_rows, accepted=accepted, now=now).data()
            written = [r["id"] for r in rows]
            links = [pair for key in accepted for pair in pairs[key]]
            tx.run(q.LINK_NEXT, pairs=links).consume()
            accepted_set = set(accepted)
            # Only a document stored before can hold chunks its new version no longer has: for
            # new ones (most writes) the two statements that find and remove them are not run.
            known = {r["key"] for r in upserted if not r["fresh"]}
            kept = [row for row in document_rows if row["key"] in known]
            removed: list[str] = []
            old_sessions: list[Row] = []
            if kept:
                stale_ids = [r["id"] for r in tx.run(gq.STALE_CHUNKS, documents=kept)]
                touched, old_sessions = graph.before_removal(tx, stale_ids)
                removed = [r["id"] for r in tx.run(q.REMOVE_STALE_CHUNKS, documents=kept, now=now)]
                graph.prune(tx, touched)
            written_set = set(written)
            graph.derive(
                tx,
                [row for row in entity_rows if row["id"] in written_set],
                old_sessions,
                fresh={r["id"] for r in rows if r["fresh"]},
            )
            return WriteOutcome(
                written=accepted,
                stale=[row["key"] for row in document_rows if row["key"] not in accepted_set],
                memory_ids=written,
                removed_ids=removed,
            )

        with translated_errors(), self._driver.session(database=self._database) as session:
            return session.execute_write(work)

    def delete_documents(self, keys: Sequence[str], version: int) -> list[str]:
        """Deletes documents not newer than ``version``; returns the Memory ids removed."""
        now = utc_now()
        params: Row = {"keys": list(keys), "version": version, "now": now}

        def work(tx: ManagedTransaction) -> list[Row]:
            ids = [r["id"] for r in tx.run(gq.DOCUMENT_MEMORIES_TO_DELETE, **params)]
            delete = q.DELETE_DOCUMENTS
            removed: list[Row] = self.graph.remove(
                tx, ids, lambda t: [r.data() for r in t.run(delete, **params)]
            )
            return removed

        rows = self._transaction(work)
        return [memory_id for row in rows for memory_id in row["removed"]]

    # The derived graph (sessions, turn order, entities): backfill and restore.

    def derive_graph(self, ids: Sequence[str]) -> int:
        """Derives sessions, turn order and entities for these Memories from their own fields, as
        a write does (idempotent): Memories written before the graph existed, or restored."""
        if not self._graph_schema_ready:
            # Before the first entity is merged: without the uniqueness constraints, two writers
            # (a backfill beside a worker of the earlier version) could each make one Entity of
            # the same id, and the constraint could then never be made (every search failing).
            for statement in gq.GRAPH_SCHEMA:
                self._schema(statement)
            self._graph_schema_ready = True
        rows = self._read(gq.MEMORIES_TO_DERIVE, ids=list(ids), format=TERM_VECTOR_PREFIX)
        sources = [GraphSource(r["id"], r["user_id"], r["content"] or "") for r in rows]
        entity_rows = self.graph.entity_rows(sources)
        # Memories written before the store kept term vectors (or kept them made another way) get
        # theirs, which searches read; one a write has made meanwhile stays.
        vectors = [
            {"id": r["id"], "vector": term_vector(r["content"] or "")} for r in rows if not r["vectored"]
        ]

        def work(tx: ManagedTransaction) -> None:
            if vectors:
                tx.run(gq.SET_TERM_VECTORS, rows=vectors, format=TERM_VECTOR_PREFIX).consume()
            self.graph.derive(tx, entity_rows)

        self._transaction(work)
        return len(rows)

    def memory_ids_page(self, user_id: str | None, after: str | None, limit: int) -> list[str]:
        return [r["id"] for r in self._read(gq.MEMORY_PAGE, user_id=user_id, after=after, limit=limit)]


def memory_of(staged: StagedDocument, chunk_index: int, model: str, dimension: int) -> Memory:
    """A chunk as the Memory both stores hold."""
    doc = staged.document
    chunk = staged.chunks[chunk_index]
    return Memory(
        id=chunk.id,
        document_key=staged.key,
        document_id=doc.document_id,
        user_id=doc.user_id,
        chunk_index=chunk.chunk_index,
        content=chunk.content,
        key=chunk.content[:200],
        content_hash=chunk.content_hash,
        token_count=chunk.token_count,
        memory_type=doc.memory_type,
        project_id=doc.project_id,
        session_id=doc.session_id,
        position=doc.position,
        title=doc.title,
        tags=list(doc.tags),
        importance=doc.importance,
        confidence=doc.confidence,
        created_at=doc.created_at or staged.received_at,
        version=staged.version,
        embedding_model=model,
        embedding_dim=dimension,
    )
