"""Rerankers over HTTP: Hugging Face TEI's ``/rerank``, and the Cohere / Jina / vLLM style
``/v1/rerank``. An adapter builds its body and reads its answer; the call and its checks are here."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

import httpx

from shared.errors import ModelAnswerRejected
from shared.httpjson import client, post_json
from shared.rerank.base import Reranked

SERVICE = "reranker"


class HttpReranker(ABC):
    path: ClassVar[str]

    def __init__(
        self,
        url: str | None,
        model: str,
        api_key: str | None,
        timeout_s: float,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.name = f"{type(self).__name__}:{model}"
        self._model = model
        self._api_key = api_key
        self._http = client("ENGRAM_RERANK_URL", url, timeout_s, transport)

    @abstractmethod
    def _payload(self, query: str, texts: list[str]) -> dict[str, Any]: ...

    @abstractmethod
    def _scores(self, body: Any) -> list[tuple[Any, Any]]:
        """(index, score) pairs out of the answer; raises KeyError/TypeError when it is malformed."""

    def rerank(self, query: str, texts: Sequence[str]) -> list[Reranked]:
        texts = list(texts)
        if not texts:
            return []
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        body = post_json(self._http, SERVICE, self.path, self._payload(query, texts), headers)
        try:
            pairs = self._scores(body)
            ranked = [Reranked(index=int(index), score=float(score)) for index, score in pairs]
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ModelAnswerRejected(f"{SERVICE} answered in an unknown shape: {exc!r}") from exc
        indexes = sorted(r.index for r in ranked)
        if indexes != list(range(len(texts))) or not all(math.isfinite(r.score) for r in ranked):
            raise ModelAnswerRejected(
                f"{SERVICE} scored {len(ranked)} texts of {len(texts)}, or gave an index twice or "
                "out of range, or a score that is not a number"
            )
        return sorted(ranked, key=lambda r: (-r.score, r.index))

    def close(self) -> None:
        self._http.close()


class TeiReranker(HttpReranker):
    """``POST /rerank {"query", "texts"}`` → ``[{"index", "score"}, ...]``."""

    path = "/rerank"

    def _payload(self, query: str, texts: list[str]) -> dict[str, Any]:
        return {"query": query, "texts": texts, "truncate": True}

    def _scores(self, body: Any) -> list[tuple[Any, Any]]:
        return [(item["index"], item["score"]) for item in body]


class CohereReranker(HttpReranker):
    """``POST /v1/rerank {"model", "query", "documents", "top_n"}`` →
    ``{"results": [{"index", "relevance_score"}, ...]}`` (Cohere, Jina, vLLM, Infinity)."""

    path = "/v1/rerank"

    def _payload(self, query: str, texts: list[str]) -> dict[str, Any]:
        return {"model": self._model, "query": query, "documents": texts, "top_n": len(texts)}

    def _scores(self, body: Any) -> list[tuple[Any, Any]]:
        return [(item["index"], item["relevance_score"]) for item in body["results"]]
