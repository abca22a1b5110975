"""An optional reranker behind one Protocol: a cross-encoder served over HTTP reorders the first
results. Off unless ``ENGRAM_SEARCH_RERANKER_URL`` is set (no cross-encoder ships offline here).

- ``tei``: Hugging Face text-embeddings-inference, ``POST /rerank`` ``{"query", "texts"}`` →
  ``[{"index", "score"}]``.
- ``cohere``: any Cohere/Jina-style endpoint, ``POST /v1/rerank`` ``{"model", "query",
  "documents", "top_n"}`` → ``{"results": [{"index", "relevance_score"}]}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal, Protocol

import httpx

from shared.errors import ServiceUnavailable
from shared.search.records import Ranked

RerankApi = Literal["tei", "cohere"]


class Reranker(Protocol):
    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """A score per text, in the texts' order; raises ``ServiceUnavailable``."""
        ...


class HttpReranker:
    def __init__(
        self,
        url: str,
        api: RerankApi = "tei",
        model: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 5.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(base_url=url, headers=headers, timeout=timeout_s, transport=transport)
        self._api = api
        self._model = model

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        try:
            if self._api == "tei":
                response = self._client.post("/rerank", json={"query": query, "texts": list(texts)})
                response.raise_for_status()
                pairs = [(int(item["index"]), float(item["score"])) for item in response.json()]
            else:
                body: dict[str, Any] = {"query": query, "documents": list(texts), "top_n": len(texts)}
                if self._model:
                    body["model"] = self._model
                response = self._client.post("/v1/rerank", json=body)
                response.raise_for_status()
                results = response.json()["results"]
                pairs = [(int(item["index"]), float(item["relevance_score"])) for item in results]
        except (httpx.HTTPError, KeyError, TypeError, ValueError) as exc:
            raise ServiceUnavailable("reranker", f"{type(exc).__name__}: {exc}") from exc
        scores = dict(pairs)
        if set(scores) != set(range(len(texts))):
            raise ServiceUnavailable("reranker", f"scored {len(scores)} of {len(texts)} texts")
        return [scores[i] for i in range(len(texts))]

    def close(self) -> None:
        self._client.close()


def reranked(query: str, ranked: Sequence[Ranked], reranker: Reranker, top_n: int) -> list[Ranked]:
    """The first ``top_n`` reordered by the reranker's score (which becomes their score); the
    rest after them, as they were."""
    head, tail = list(ranked[:top_n]), list(ranked[top_n:])
    scores = reranker.rerank(query, [r.hit.content for r in head])
    rescored = [replace(r, rerank=s, score=s) for r, s in zip(head, scores, strict=True)]
    rescored.sort(key=lambda r: -(r.rerank or 0.0))
    return rescored + tail
