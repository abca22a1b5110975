"""Optional second-stage reranking, chosen by ``ENGRAM_RERANK_BACKEND`` (off by default: no
cross-encoder ships offline with Engram)."""

from __future__ import annotations

from typing import assert_never

import httpx

from shared.rerank.base import Reranked, Reranker
from shared.settings import Settings


def make_reranker(settings: Settings, transport: httpx.BaseTransport | None = None) -> Reranker | None:
    backend = settings.rerank_backend
    if backend == "none":
        return None
    from shared.rerank.http import CohereReranker, TeiReranker

    key = settings.rerank_api_key.get_secret_value() if settings.rerank_api_key else None
    args = (settings.rerank_url, settings.rerank_model, key, settings.rerank_timeout_s)
    if backend == "tei":
        return TeiReranker(*args, transport=transport)
    if backend == "cohere":
        return CohereReranker(*args, transport=transport)
    assert_never(backend)


__all__ = ["Reranked", "Reranker", "make_reranker"]
