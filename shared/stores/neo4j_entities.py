"""Reads of the entity graph (``neo4j/graph_queries.py``) over the store's connection: the entity
API and the graph's search sources. Every read is scoped to one tenant."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shared.graph.entities import entity_key, normalise
from shared.graph.models import EntityDetail, EntityMemory, EntityPage, EntitySummary, RelatedEntity
from shared.stores.neo4j import Neo4jStore
from shared.stores.neo4j import graph_queries as gq
from shared.stores.neo4j.graph import entity_id

Row = dict[str, Any]


def _summary(row: Row) -> EntitySummary:
    return EntitySummary(
        key=row["key"],
        name=row["name"],
        kind=row.get("kind") or "thing",
        aliases=list(row.get("aliases") or []),
        memories=int(row.get("memories") or 0),
    )


class Neo4jEntities:
    def __init__(self, store: Neo4jStore) -> None:
        self._store = store

    def list_entities(
        self,
        user_id: str,
        prefix: str | None = None,
        text: str | None = None,
        kind: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> EntityPage:
        """The tenant's entities, most mentioned first: those whose name (or an alias) starts
        with ``prefix``, or holds ``text``, of ``kind``."""
        rows = self._store.read_rows(
            gq.LIST_ENTITIES,
            user_id=user_id,
            prefix=normalise(prefix) if prefix else None,
            text=normalise(text) if text else None,
            kind=kind,
            limit=limit + 1,
            offset=offset,
        )
        entities = [_summary(row["entity"]) for row in rows[:limit]]
        return EntityPage(entities=entities, next_offset=offset + limit if len(rows) > limit else None)

    def get_entity(
        self, user_id: str, name: str, memories: int = 20, related: int = 20
    ) -> EntityDetail | None:
        """One entity by its name (any way of writing it that resolves to its key: a date's too)."""
        key = entity_key(name)
        if not key:
            return None
        rows = self._store.read_rows(
            gq.GET_ENTITY, id=entity_id(user_id, key), user_id=user_id, memories=memories, related=related
        )
        if not rows:
            return None
        row = rows[0]
        return EntityDetail(
            **_summary(row["entity"]).model_dump(),
            mentioned_in=[EntityMemory.model_validate(m) for m in row["memories"]],
            related=[
                RelatedEntity(
                    key=r["entity"]["key"],
                    name=r["entity"]["name"],
                    kind=r["entity"].get("kind") or "thing",
                    count=int(r["count"] or 0),
                    memory_ids=list(r["memory_ids"] or []),
                )
                for r in row["related"]
            ],
        )

    def entities_by_key(self, user_id: str, keys: Sequence[str]) -> dict[str, int]:
        """Of these keys, those the tenant has an entity for, with how many memories name it."""
        rows = self._store.read_rows(gq.ENTITIES_BY_KEY, user_id=user_id, keys=list(keys))
        return {row["key"]: int(row["n"]) for row in rows}
