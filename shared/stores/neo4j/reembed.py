"""A model migration (engram reembed; shared/services/reembed.py): its state, the next model's
vectors put beside the current ones page by page, and the switch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from shared.models import Memory, utc_now
from shared.stores.base import EmbeddingTarget, MigrationPhase, MigrationState, ReembedRow
from shared.stores.neo4j import reembed_queries as mq
from shared.stores.neo4j import schema_queries as q
from shared.stores.neo4j.connection import Row, version_rows
from shared.stores.neo4j.schema import SchemaOps


class ReembedOps(SchemaOps):
    def migration(self) -> MigrationState | None:
        rows = self._read(mq.MIGRATION)
        return _migration(rows[0]["migration"]) if rows else None

    def start_migration(
        self, source: tuple[str, int], target: EmbeddingTarget, now: datetime
    ) -> MigrationState:
        current = self.migration()
        if current is not None and current.phase != "done" and current.target.key == target.key:
            self._write(mq.NEXT_RUN)
        else:
            fields = {
                "target_model": target.model,
                "target_dim": target.dimension,
                "target_backend": target.backend,
                "target_url": target.url,
                "target_max_tokens": target.max_tokens,
                "target_tokenizer_path": target.tokenizer_path,
                "target_local_model_path": target.local_model_path,
            }
            self._claim(
                mq.NEW_MIGRATION, target=fields, source_model=source[0], source_dim=source[1], now=now
            )
        started = self.migration()
        assert started is not None
        return started

    def reembed_pending(self, target: EmbeddingTarget, after: str | None, limit: int) -> list[str]:
        rows = self._read(mq.PENDING, after=after, limit=limit, **_target(target))
        return [row["id"] for row in rows]

    def reembed_progress(self, target: EmbeddingTarget) -> tuple[int, int]:
        row = self._read(mq.PROGRESS, **_target(target))[0]
        return int(row["total"] or 0), int(row["done"] or 0)

    def reembed_rows(self, ids: Sequence[str]) -> list[ReembedRow]:
        found: list[ReembedRow] = []
        for row in self._read(mq.ROWS, ids=list(ids)):
            memory = row["memory"]
            model, dim = memory.get("embedding_next_model"), memory.get("embedding_next_dim")
            found.append(
                ReembedRow(
                    memory=Memory.model_validate(memory),
                    next_vector=row["next_vector"],
                    next_model=(model, int(dim)) if model is not None and dim is not None else None,
                    next_version=memory.get("embedding_next_version"),
                    next_synced=bool(memory.get("embedding_next_synced")),
                )
            )
        return found

    def put_next_vectors(
        self, target: EmbeddingTarget, vectors: Mapping[str, tuple[int, list[float]]]
    ) -> list[str]:
        rows = [{"id": k, "version": v, "embedding": e} for k, (v, e) in vectors.items()]
        return [row["id"] for row in self._write(mq.PUT_NEXT, rows=rows, **_target(target))]

    def mark_next_synced(self, target: EmbeddingTarget, versions: Mapping[str, int]) -> None:
        if versions:
            self._write(mq.MARK_NEXT_SYNCED, rows=version_rows(versions), **_target(target))

    def record_page(self, run: int, reembedded: int) -> None:
        self._write(mq.RECORD_PAGE, run=run, reembedded=reembedded)

    def set_phase(self, phase: MigrationPhase, now: datetime) -> None:
        self._write(mq.SET_PHASE, phase=phase, now=now)

    def drop_vector_index_unless(self, dimension: int) -> None:
        existing = self._read(q.SHOW_VECTOR_INDEX, name=q.VECTOR_INDEX)
        if existing and existing[0]["dimension"] != dimension:
            self._write(mq.DROP_VECTOR_INDEX)
        self._schema_ready.clear()

    def copy_next_vectors(self, target: EmbeddingTarget, limit: int) -> int:
        rows = self._write(mq.COPY_NEXT, limit=limit, now=utc_now(), **_target(target))
        return int(rows[0]["copied"]) if rows else 0

    def not_switched(self, target: EmbeddingTarget) -> int:
        return int(self._read(mq.NOT_SWITCHED, **_target(target))[0]["n"] or 0)

    def finish_switch(self, target: EmbeddingTarget, now: datetime) -> None:
        self._write(mq.FINISH_SWITCH, now=now, **_target(target))
        self._schema_ready.clear()

    def forget_source_model(self, now: datetime) -> None:
        self._write(mq.FORGET_SOURCE_MODEL, now=now)


def _target(target: EmbeddingTarget) -> Row:
    return {"model": target.model, "dimension": target.dimension}


def _migration(node: Row) -> MigrationState:
    return MigrationState(
        source=(node["source_model"], int(node["source_dim"])),
        target=EmbeddingTarget(
            model=node["target_model"],
            dimension=int(node["target_dim"]),
            backend=node.get("target_backend") or "local",
            url=node.get("target_url"),
            max_tokens=int(node.get("target_max_tokens") or 256),
            tokenizer_path=node.get("target_tokenizer_path"),
            local_model_path=node.get("target_local_model_path"),
        ),
        phase=node["state"],
        run=int(node["run"]),
        started_at=node["started_at"],
        switched_at=node.get("switched_at"),
        pages=int(node.get("pages") or 0),
        reembedded=int(node.get("reembedded") or 0),
        run_pages=int(node.get("run_pages") or 0),
        run_reembedded=int(node.get("run_reembedded") or 0),
        old_dropped_at=node.get("old_dropped_at"),
    )
