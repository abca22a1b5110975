"""Waiting on a load: how far its documents are, polling only those not finished yet.

A wait over a bulk load (``engram ingest``, ``engram eval``, ``engram bench``) read every
document's progress record twice a second; at 10,000 documents that cost the waiting process up
to half a core (redis-py parsing 10,000 replies in Python: 0.5 CPU-s a poll, 0.2 with hiredis), taken
from the workers it waits on. A document done, failed or found unchanged stays so at its
version, so each poll drops those and reads the rest, and polls are spaced by how many are left.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Protocol

from shared.models import FINAL_STATES
from shared.services.refs import DocRef


class Progressing(Protocol):
    def progress_of(self, documents: Sequence[DocRef]) -> tuple[Counter[str], list[DocRef]]: ...


def load_state(version: int, recorded: tuple[str, int] | None) -> str:
    """The state of a document a load gave ``version``, from its record's (state, version): a record
    of a newer version counts as done (this one is superseded), of an older one as queued unless it
    says the document was found unchanged (so never enqueued)."""
    if recorded is None:
        return "unknown"
    state, at = recorded
    if state == "unchanged":
        return state
    if at > version:
        return "done"
    if at < version:
        return "queued"
    return state


class LoadProgress:
    def __init__(self, refs: Sequence[DocRef]) -> None:
        self._todo = list(refs)
        self.total = len(self._todo)
        self._final: Counter[str] = Counter()

    def poll(self, client: Progressing) -> Counter[str]:
        """Counts by state over the whole load, as ``EngramClient.states`` of every document."""
        states, self._todo = client.progress_of(self._todo)
        for state in FINAL_STATES:
            self._final[state] += states.pop(state, 0)
        states.update(self._final)
        return states

    @property
    def finished(self) -> int:
        return self.total - len(self._todo)

    def pause(self) -> float:
        """Seconds to wait before the next poll: longer while many are unfinished (reading 10,000
        records costs ~0.2 CPU-s even with hiredis), short near the end, so the end is seen soon."""
        return min(3.0, 0.5 + len(self._todo) / 4000)
