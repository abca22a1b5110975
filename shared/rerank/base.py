"""A reranker scores (query, text) pairs with a cross-encoder: slower than the first stage, so it
sees only the best fused candidates (``ENGRAM_RERANK_CANDIDATES``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel


class Reranked(BaseModel):
    """One text's place after reranking: its index in the texts given, and the model's score."""

    index: int
    score: float


class Reranker(Protocol):
    name: str

    def rerank(self, query: str, texts: Sequence[str]) -> list[Reranked]:
        """Every text given, best first."""
        ...

    def close(self) -> None: ...
