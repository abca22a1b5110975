"""The graph derived from Memories, written inside the store's own transactions.

``GraphWriter`` is called by ``Neo4jStore`` in every write and delete (and by ``engram graph
backfill``): it chains the turns of the sessions touched, and derives the entities of the
Memories written, from nothing but the Memories' own fields. Entities are extracted here, in
Python, before the transaction's statements run; the statements are in ``graph_queries``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from neo4j import ManagedTransaction

from shared.graph.entities import EntityExtractor, Mention
from shared.models import utc_now
from shared.stores.neo4j import graph_queries as gq
from shared.stores.neo4j.filters import MEMORY_FILTER
from shared.stores.neo4j.search_queries import FIELDS

Row = dict[str, Any]
SEPARATOR = "\x1f"  # no identifier holds a control character, so tenant and name never blur

MEMORIES_TO_DELETE = gq.MEMORIES_TO_DELETE.replace("{memory_filter}", MEMORY_FILTER)
ENTITY_CANDIDATES = gq.ENTITY_CANDIDATES.replace("{memory_filter}", MEMORY_FILTER).replace("{fields}", FIELDS)
BESIDE_CANDIDATES = gq.BESIDE_CANDIDATES.replace("{memory_filter}", MEMORY_FILTER).replace("{fields}", FIELDS)


def entity_id(user_id: str, key: str) -> str:
    return f"{user_id}{SEPARATOR}{key}"


def session_id(user_id: str, session: str) -> str:
    return f"{user_id}{SEPARATOR}{session}"


@dataclass(frozen=True, slots=True)
class GraphSource:
    """The fields of a Memory the graph is derived from."""

    id: str
    user_id: str
    content: str
    session_id: str | None = None


class GraphWriter:
    def __init__(self, extractor: EntityExtractor, related_limit: int = 10) -> None:
        self._extractor = extractor
        self._related_limit = related_limit

    @property
    def extractor(self) -> EntityExtractor:
        return self._extractor

    def entity_rows(self, memories: Iterable[GraphSource]) -> list[Row]:
        """Per Memory, its entities (in id order) and the pairs of its first few as relations."""
        rows: list[Row] = []
        for memory in memories:
            mentions = self._extractor.extract(memory.content)
            rows.append(self.entity_row(memory, mentions))
        return rows

    def entity_row(self, memory: GraphSource, mentions: Sequence[Mention]) -> Row:
        related = sorted({entity_id(memory.user_id, m.key) for m in mentions[: self._related_limit]})
        entities = sorted(
            (
                {
                    "id": (key := entity_id(memory.user_id, m.key)),
                    "key": m.key,
                    "name": m.name,
                    "kind": m.kind,
                    "paired": key in related,
                }
                for m in mentions
            ),
            key=lambda e: str(e["id"]),
        )
        pairs = [[a, b] for a, b in combinations(related, 2)]
        return {
            "id": memory.id,
            "user_id": memory.user_id,
            "session_id": memory.session_id,
            "entities": entities,
            "pairs": pairs,
        }

    def derive(
        self,
        tx: ManagedTransaction,
        rows: Sequence[Row],
        sessions: Iterable[Row] = (),
        fresh: Collection[str] = frozenset(),
    ) -> None:
        """Entities of these Memories derived again, and their sessions (and ``sessions``,
        those of Memories removed meanwhile) chained again. A ``fresh`` Memory, made by this
        transaction, has no entity or session to be read or undone: its session is its own."""
        ids = [row["id"] for row in rows]
        if not ids:
            self.relink(tx, sessions)
            return
        stored = [i for i in ids if i not in fresh]
        found = [dict(r) for r in tx.run(gq.SESSIONS_OF, ids=stored)] if stored else []
        # A fresh Memory's session is its own field, as SESSIONS_OF would read it.
        found += [
            {"user_id": row["user_id"], "session_id": row["session_id"]}
            for row in rows
            if row["id"] in fresh and row.get("session_id") is not None
        ]
        touched = self.unlink(tx, stored)
        linked = [row for row in rows if row["entities"]]
        if linked:
            tx.run(gq.LINK_ENTITIES, rows=linked, now=utc_now()).consume()
        self.prune(tx, touched)
        self.relink(tx, [*found, *sessions])

    def unlink(self, tx: ManagedTransaction, ids: Sequence[str]) -> list[str]:
        if not ids:
            return []
        return sorted({e for r in tx.run(gq.UNLINK_ENTITIES, ids=list(ids)) for e in r["entities"]})

    def prune(self, tx: ManagedTransaction, entity_ids: Sequence[str]) -> None:
        if entity_ids:
            tx.run(gq.PRUNE_ENTITIES, ids=list(entity_ids)).consume()

    def relink(self, tx: ManagedTransaction, sessions: Iterable[Mapping[str, Any]]) -> None:
        keys = {
            session_id(s["user_id"], s["session_id"]): {
                "id": session_id(s["user_id"], s["session_id"]),
                "user_id": s["user_id"],
                "session_id": s["session_id"],
            }
            for s in sessions
            if s.get("session_id") is not None and s.get("user_id") is not None
        }
        if keys:
            ordered = [keys[key] for key in sorted(keys)]  # one lock order for every writer
            tx.run(gq.RELINK_SESSIONS, sessions=ordered, now=utc_now()).consume()

    def before_removal(self, tx: ManagedTransaction, ids: Sequence[str]) -> tuple[list[str], list[Row]]:
        """Before Memories are deleted: they stop naming entities; returns the entities touched
        and the sessions that held them, for ``after_removal``."""
        if not ids:
            return [], []
        sessions = [dict(r) for r in tx.run(gq.SESSIONS_OF, ids=list(ids))]
        return self.unlink(tx, ids), sessions

    def after_removal(self, tx: ManagedTransaction, touched: Sequence[str], sessions: Sequence[Row]) -> None:
        self.prune(tx, touched)
        self.relink(tx, sessions)

    def remove(self, tx: ManagedTransaction, ids: Sequence[str], delete: Any) -> Any:
        """Runs ``delete(tx)`` between the graph's steps before and after removing ``ids``."""
        touched, sessions = self.before_removal(tx, ids)
        result = delete(tx)
        self.after_removal(tx, touched, sessions)
        return result
