"""Rerankers over HTTP, tested through httpx's MockTransport (no cross-encoder ships here)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from shared.errors import ConfigurationError, ModelAnswerRejected, ServiceUnavailable
from shared.rerank import make_reranker
from shared.rerank.base import Reranked, Reranker
from shared.settings import Settings

TEXTS = ["Paris is in France.", "The Eiffel Tower is in Paris.", "Bananas are yellow."]


def server(
    answer: Callable[[dict[str, Any]], httpx.Response], seen: list[httpx.Request]
) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answer(json.loads(request.content))

    return httpx.MockTransport(handle)


def reranker(backend: str, transport: httpx.MockTransport, **extra: Any) -> Reranker:
    settings = Settings(rerank_backend=backend, rerank_url="http://rerank:8080", rerank_model="bge", **extra)
    made = make_reranker(settings, transport=transport)
    assert made is not None
    return made


def test_off_by_default() -> None:
    assert make_reranker(Settings()) is None


def test_a_backend_without_its_url_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="ENGRAM_RERANK_URL"):
        Settings(rerank_backend="tei")


def test_tei_rerank_orders_every_text_best_first() -> None:
    seen: list[httpx.Request] = []
    answer = [{"index": 0, "score": 0.2}, {"index": 1, "score": 0.9}, {"index": 2, "score": -3.0}]
    tei = reranker("tei", server(lambda body: httpx.Response(200, json=answer), seen))

    ranked = tei.rerank("where is the Eiffel Tower", TEXTS)

    assert ranked == [
        Reranked(index=1, score=0.9),
        Reranked(index=0, score=0.2),
        Reranked(index=2, score=-3.0),
    ]
    assert seen[0].url.path == "/rerank"
    assert json.loads(seen[0].content) == {
        "query": "where is the Eiffel Tower",
        "texts": TEXTS,
        "truncate": True,
    }


def test_cohere_style_rerank_sends_model_key_and_reads_results() -> None:
    seen: list[httpx.Request] = []
    results = {
        "results": [
            {"index": 2, "relevance_score": 0.1},
            {"index": 0, "relevance_score": 0.7},
            {"index": 1, "relevance_score": 0.8},
        ]
    }
    cohere = reranker(
        "cohere", server(lambda body: httpx.Response(200, json=results), seen), rerank_api_key="sk-1"
    )

    ranked = cohere.rerank("eiffel", TEXTS)

    assert [r.index for r in ranked] == [1, 0, 2]
    assert seen[0].url.path == "/v1/rerank"
    assert seen[0].headers["authorization"] == "Bearer sk-1"
    assert json.loads(seen[0].content) == {"model": "bge", "query": "eiffel", "documents": TEXTS, "top_n": 3}


def test_nothing_to_rerank_calls_nobody() -> None:
    seen: list[httpx.Request] = []
    tei = reranker("tei", server(lambda body: httpx.Response(500), seen))
    assert tei.rerank("q", []) == []
    assert seen == []


@pytest.mark.parametrize(
    "answer",
    [
        [{"index": 0, "score": 0.2}],  # a text left out
        [{"index": 0, "score": 0.2}, {"index": 0, "score": 0.3}, {"index": 1, "score": 0.1}],  # twice
        [{"index": 0, "score": 0.2}, {"index": 1, "score": 0.3}, {"index": 7, "score": 0.1}],  # out of range
        [{"index": 0, "score": "NaN"}, {"index": 1, "score": 0.3}, {"index": 2, "score": 0.1}],
        {"unexpected": True},
        [{"idx": 0}],
    ],
)
def test_an_answer_that_does_not_score_each_text_once_is_rejected(answer: Any) -> None:
    tei = reranker("tei", server(lambda body: httpx.Response(200, json=answer), []))
    with pytest.raises(ModelAnswerRejected):
        tei.rerank("q", TEXTS)


@pytest.mark.parametrize(
    ("status", "error"), [(503, ServiceUnavailable), (429, ServiceUnavailable), (400, ModelAnswerRejected)]
)
def test_http_failures_are_translated(status: int, error: type[Exception]) -> None:
    tei = reranker("tei", server(lambda body: httpx.Response(status, text="nope"), []))
    with pytest.raises(error):
        tei.rerank("q", TEXTS)


def test_a_server_that_cannot_be_reached_is_unavailable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    tei = reranker("tei", httpx.MockTransport(refuse))
    with pytest.raises(ServiceUnavailable, match="reranker"):
        tei.rerank("q", TEXTS)
