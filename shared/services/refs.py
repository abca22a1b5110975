"""How a batch names its documents between the stages: (document key, version) pairs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from shared.models import DocumentState

DocRef = tuple[str, int]


def refs(pairs: Iterable[Sequence[object]]) -> list[DocRef]:
    """Pairs as they come out of a JSON task message (lists), as typed tuples."""
    return [(str(key), int(str(version))) for key, version in pairs]


class ProgressLog(Protocol):
    """Where documents stand (``shared.progress.Progress``)."""

    def set(
        self,
        documents: Iterable[DocRef],
        state: DocumentState,
        error: str | None = None,
        batch: str | None = None,
        force: bool = False,
    ) -> None: ...

    def set_counts(self, counts: Iterable[tuple[str, int, int, int]]) -> None:
        """(document key, version, chunks reused, chunks embedded), kept on that version's record."""
        ...
