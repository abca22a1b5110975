"""Text embedding: one :class:`Embedder` per process, chosen by ``ENGRAM_EMBEDDING_BACKEND``."""

from __future__ import annotations

from typing import assert_never

import httpx

from shared.embedding.base import Embedder
from shared.settings import Settings


def make_embedder(settings: Settings, transport: httpx.BaseTransport | None = None) -> Embedder:
    """The embedder ``settings`` ask for; ``transport`` replaces the network of HTTP backends."""
    backend = settings.embedding_backend
    embedder: Embedder
    if backend == "local":
        # Imported here so that HTTP-only deployments never load onnxruntime.
        from shared.embedding.local import LocalOnnxEmbedder

        embedder = LocalOnnxEmbedder(settings)
    elif backend == "tei":
        from shared.embedding.tei import TeiEmbedder

        embedder = TeiEmbedder(settings, transport=transport)
    elif backend == "ollama":
        from shared.embedding.ollama import OllamaEmbedder

        embedder = OllamaEmbedder(settings, transport=transport)
    elif backend == "openai":
        from shared.embedding.openai import OpenAIEmbedder

        embedder = OpenAIEmbedder(settings, transport=transport)
    else:
        assert_never(backend)
    return embedder


__all__ = ["Embedder", "make_embedder"]
