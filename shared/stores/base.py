"""The interface of the backup vector store; workers see only this."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class VectorPoint:
    id: str
    vector: Sequence[float]
    payload: dict[str, Any] = field(default_factory=dict)


class VectorStore(Protocol):
    """One collection per embedding model; point id = Memory id; payload = the Memory's fields."""

    def ensure_collection(self) -> None: ...

    def upsert(self, points: Sequence[VectorPoint]) -> None: ...

    def delete(self, ids: Sequence[str]) -> None: ...

    def close(self) -> None: ...
