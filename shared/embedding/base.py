"""The interface every embedding backend fills in.

Workers see only :class:`Embedder`; which backend runs is decided once, in
:func:`shared.embedding.make_embedder`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of one model.

    ``model_name`` is recorded on every Memory it embeds: vectors of two models are never compared.
    """

    @property
    def model_name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed documents; returns an array of shape ``(len(texts), dimension)``."""
        ...

    def embed_query(self, text: str) -> Vectors:
        """Embed one search query; returns an array of shape ``(dimension,)``."""
        ...


def normalise(vectors: Vectors) -> Vectors:
    """L2-normalise rows so cosine similarity is a dot product; zero rows stay zero."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    unit: Vectors = (vectors / norms).astype(np.float32, copy=False)
    return unit
