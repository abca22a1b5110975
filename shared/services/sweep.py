"""Where the scheduled passes' drift sweep got, and how a partial sweep judges a mass deletion.

A scheduled pass compares at most ``ENGRAM_RECONCILE_SCAN_BUDGET`` Memories, and as many points
of each collection, going on from the id where the pass before stopped, and saves where it stopped
(``(:EngramSchema {id: 'reconcile_sweep'})``). The pass that reaches the last id ends a *round*:
the next one starts again from the first. So the whole store is swept over successive passes, a
pass costs about the same whatever the store's size, and drift is found within a round (passes x
``ENGRAM_RECONCILE_INTERVAL_S``). A pass asked for on demand (``engram reconcile``) sweeps
everything in one round of its own and leaves the cursor alone; a dry run (scheduled, it sweeps
its slice) leaves it alone too.

The mass-delete refusal is judged against the whole collection, never against one pass's slice:
otherwise a primary that lost a third of its Memories would have them deleted from the backup
slice by slice, each slice's orphans under the limit. What is judged, per collection:

* a round that has compared every point (a pass on demand, a collection within one budget, the
  pass that ends a round): the orphans the round found, counted exactly, as before;
* a round still under way: the orphans found so far this round (so a round never deletes more
  than the limit without --force), or, when more, as many as the rate found so far predicts over
  the whole collection (orphans / points compared x the collection's points). Memory ids are
  uuid5 hashes, spread evenly over the id space, so a slice of it is a fair sample, and a mass
  deletion is refused from the round's first slice, as a whole pass refused it before.

A pass deletes its orphans only when what is judged stays within the limit; those a refused pass
kept are found again in the next round.
"""

from __future__ import annotations

import logging
import math

from pydantic import BaseModel, Field, ValidationError

log = logging.getLogger(__name__)


class CollectionRound(BaseModel):
    """What the round under way found in one collection."""

    compared: int = Field(0, description="Points compared this round.")
    orphans: int = Field(0, description="Points without a Memory found this round (deleted or not).")

    def plus(self, compared: int, orphans: int) -> CollectionRound:
        return CollectionRound(compared=self.compared + compared, orphans=self.orphans + orphans)

    def judged_orphans(self, points: int, complete: bool) -> int:
        """The orphans the mass-delete refusal judges, of a collection of ``points``; ``complete``
        when the round has compared every point (see the module's docstring)."""
        if complete or self.compared >= points:
            return self.orphans
        return max(self.orphans, math.ceil(self.orphans * points / max(self.compared, 1)))


class SweepCursor(BaseModel):
    """Where the scheduled passes' sweep got: saved by each one, read by the next."""

    after: str | None = Field(
        None, description="The last id the sweep compared (Memory or point); None: a round starts."
    )
    memories_compared: int = Field(0, description="Memories compared this round.")
    rounds: int = Field(0, description="Rounds ended: sweeps that reached the last id.")
    collections: dict[str, CollectionRound] = Field(default_factory=dict)

    def collection(self, name: str) -> CollectionRound:
        return self.collections.get(name) or CollectionRound()

    def advanced(
        self, after: str | None, memories: int, collections: dict[str, CollectionRound]
    ) -> SweepCursor:
        """After a pass that compared up to ``after`` (None: it reached the last id, and the next
        pass starts a new round); ``collections``: this round's tallies with the pass's."""
        if after is None:
            return SweepCursor(rounds=self.rounds + 1)
        return SweepCursor(
            after=after,
            memories_compared=self.memories_compared + memories,
            rounds=self.rounds,
            collections=collections,
        )


def read_cursor(saved: str | None) -> SweepCursor:
    """The saved cursor; one unreadable (an older shape) starts a new round."""
    if saved is None:
        return SweepCursor()
    try:
        return SweepCursor.model_validate_json(saved)
    except ValidationError as exc:
        log.warning("reconcile: the saved sweep cursor is unreadable, a new round starts: %s", exc)
        return SweepCursor()
