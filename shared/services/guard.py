"""The reconciler's guard: no point is deleted on the word of a primary that is not the one the
backup was synced with.

Neo4j makes a store id at its first bootstrap; the reconciler records it in each Qdrant
collection's metadata once it has found the two in step. A later pass compares them: a primary
with another id (a wiped or new Neo4j bootstrapped again), with none, or holding far fewer
Memories than the collection holds points (``ENGRAM_RECONCILE_MIN_PRIMARY_SHARE``) is *lost*: the
pass deletes nothing and says so, naming the command that brings the primary back from the backup.
A restore adopts the backup's id, so the next pass finds the two in step again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from shared.stores.base import StoreIdentity, VectorStore

RESTORE_HINT = (
    "restore it from the backup with `engram restore` (to start afresh instead, drop the collection)"
)


class PrimaryStore(Protocol):
    def identity(self) -> StoreIdentity: ...

    def adopt_identity(self, store_id: str) -> None: ...

    def record_primary(self, lost: str | None, points: int | None) -> None: ...


def judge(
    memories: int, store_id: str | None, points: int, recorded: str | None, min_share: float, collection: str
) -> str | None:
    """Why a primary of ``memories`` and ``store_id`` is not the one a collection of ``points``
    synced with ``recorded`` was in step with; None when it may be."""
    lost: str | None = None
    if points and memories < min_share * points:
        lost = (
            f"Neo4j holds {memories} memories but Qdrant's {collection} holds {points} "
            f"points (below the share {min_share:g}): the primary looks wiped or new"
        )
    elif recorded is not None and recorded != store_id:
        lost = (
            f"Neo4j is store {store_id or '(none)'}, but Qdrant's {collection} was synced "
            f"with store {recorded}: the primary was replaced"
        )
    return None if lost is None else f"primary_lost: {lost}; {RESTORE_HINT}"


@dataclass(frozen=True, slots=True)
class Verdict:
    lost: str | None
    """Why the primary is not the one the collection was synced with; None when it is."""
    points: int
    memories: int


class PrimaryGuard:
    def __init__(self, primary: PrimaryStore, min_share: float) -> None:
        self._primary = primary
        self._min_share = min_share

    def check(self, store: VectorStore, stamp: bool = True) -> Verdict:
        """Compares the primary with what the collection records; stamps a collection that records
        nothing yet when the primary is plausibly the one it was synced with."""
        me = self._primary.identity()
        points = store.count()
        recorded = store.identity()
        lost = judge(me.memories, me.store_id, points, recorded, self._min_share, store.collection)
        if lost is not None:
            return Verdict(lost, points, me.memories)
        if stamp and recorded is None and me.store_id is not None:
            store.stamp(me.store_id)
        return Verdict(None, points, me.memories)

    def record(self, lost: str | None, points: int | None) -> None:
        self._primary.record_primary(lost, points)
