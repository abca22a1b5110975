"""The optional reranker and agentic round, over httpx's MockTransport and in the Searcher."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx
import pytest

from shared.errors import ServiceUnavailable
from shared.models import SearchRequest
from shared.search import Searcher
from shared.search.agentic import ChatJudge, Verdict, fuse_rounds
from shared.search.records import Candidate, Hit, Ranked
from shared.search.rerank import HttpReranker, reranked
from shared.settings import Settings
from tests.unit.fakes import FakeEmbedder
from tests.unit.search_fakes import FakeSearchStore, Stored, small_tenant, stored


def transport(reply: Any, seen: list[httpx.Request], status: int = 200) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, json=reply)

    return httpx.MockTransport(handle)


def ranked(*names: str) -> list[Ranked]:
    return [
        Ranked(Candidate(Hit(n, f"text {n}", f"doc-{n}", 0), 0.5), fused=1.0 / i, score=1.0 / i)
        for i, n in enumerate(names, start=1)
    ]


# HttpReranker


def test_tei_rerank_posts_query_and_texts_and_reads_scores_by_index() -> None:
    seen: list[httpx.Request] = []
    reranker = HttpReranker(
        "http://tei",
        "tei",
        transport=transport([{"index": 1, "score": 0.9}, {"index": 0, "score": 0.2}], seen),
    )

    assert reranker.rerank("q", ["a", "b"]) == [0.2, 0.9]
    assert seen[0].url.path == "/rerank"
    assert json.loads(seen[0].content) == {"query": "q", "texts": ["a", "b"]}


def test_cohere_style_rerank_sends_model_and_key_and_reads_relevance_scores() -> None:
    seen: list[httpx.Request] = []
    reply = {"results": [{"index": 0, "relevance_score": 0.7}, {"index": 1, "relevance_score": 0.1}]}
    reranker = HttpReranker(
        "http://jina", "cohere", "jina-reranker-v2", "secret", transport=transport(reply, seen)
    )

    assert reranker.rerank("q", ["a", "b"]) == [0.7, 0.1]
    assert seen[0].url.path == "/v1/rerank"
    assert seen[0].headers["authorization"] == "Bearer secret"
    assert json.loads(seen[0].content) == {
        "query": "q",
        "documents": ["a", "b"],
        "top_n": 2,
        "model": "jina-reranker-v2",
    }


@pytest.mark.parametrize("reply,status", [({"oops": 1}, 200), ([{"index": 0, "score": 1.0}], 200), ({}, 503)])
def test_a_reranker_that_fails_or_answers_badly_is_unavailable(reply: Any, status: int) -> None:
    reranker = HttpReranker("http://tei", "tei", transport=transport(reply, [], status))

    with pytest.raises(ServiceUnavailable) as caught:
        reranker.rerank("q", ["a", "b"])
    assert caught.value.service == "reranker"


class FixedReranker:
    def __init__(self, scores: dict[str, float]) -> None:
        self.scores = scores

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        return [self.scores[t] for t in texts]


def test_reranked_reorders_the_head_and_keeps_the_tail() -> None:
    items = ranked("a", "b", "c")

    out = reranked("q", items, FixedReranker({"text a": 0.1, "text b": 0.8}), top_n=2)

    assert [(r.hit.id, r.rerank) for r in out] == [("b", 0.8), ("a", 0.1), ("c", None)]


# ChatJudge


def test_openai_compatible_judge_reads_the_json_verdict() -> None:
    seen: list[httpx.Request] = []
    content = 'Sure: {"sufficient": false, "queries": ["otter den location", "", "river in March"]}'
    judge = ChatJudge(
        "http://llm",
        "m",
        "openai",
        "k",
        transport=transport({"choices": [{"message": {"content": content}}]}, seen),
    )

    verdict = judge.judge("where do otters live", ["p1", "p2"])

    assert verdict == Verdict(False, ["otter den location", "river in March"])
    body = json.loads(seen[0].content)
    assert seen[0].url.path == "/v1/chat/completions" and body["model"] == "m" and body["temperature"] == 0
    assert "[1] p1\n[2] p2" in body["messages"][1]["content"]


def test_ollama_judge_and_an_unreadable_answer_counts_as_sufficient() -> None:
    seen: list[httpx.Request] = []
    judge = ChatJudge(
        "http://ollama", "llama3.2", "ollama", transport=transport({"message": {"content": "no json"}}, seen)
    )

    assert judge.judge("q", ["p"]) == Verdict(True)
    assert seen[0].url.path == "/api/chat" and json.loads(seen[0].content)["format"] == "json"


def test_a_judge_that_cannot_be_reached_is_unavailable() -> None:
    judge = ChatJudge("http://llm", "m", transport=transport({}, [], 500))

    with pytest.raises(ServiceUnavailable):
        judge.judge("q", ["p"])


def test_rounds_are_merged_by_reciprocal_rank() -> None:
    merged = fuse_rounds([ranked("a", "b"), ranked("c", "b")], k=60)

    assert [r.hit.id for r in merged] == ["b", "a", "c"]
    assert merged[0].score == pytest.approx(2 / 62)


# In the Searcher


class ScriptedJudge:
    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict
        self.asked: list[str] = []

    def judge(self, query: str, passages: Sequence[str]) -> Verdict:
        self.asked.append(query)
        return self.verdict


def request(**values: Any) -> SearchRequest:
    return SearchRequest.model_validate({"query": "otter river", "user_id": "small", "top_k": 3, **values})


def test_the_searcher_runs_follow_up_queries_when_the_judge_asks() -> None:
    store = FakeSearchStore([*small_tenant(), stored("lake", "small", "a quiet lake at dawn")])
    judge = ScriptedJudge(Verdict(False, ["quiet lake dawn"]))

    answer = Searcher(store, FakeEmbedder(), Settings(_env_file=None), judge=judge).search(request())

    assert answer.rounds == 2 and answer.follow_up_queries == ["quiet lake dawn"]
    assert judge.asked == ["otter river"]
    assert len(answer.results) == 3


def test_a_sufficient_verdict_keeps_one_round_and_baselines_never_ask() -> None:
    judge = ScriptedJudge(Verdict(True))
    searcher = Searcher(
        FakeSearchStore(small_tenant()), FakeEmbedder(), Settings(_env_file=None), judge=judge
    )

    assert searcher.search(request()).rounds == 1
    searcher.search(request(method="bm25"))
    assert judge.asked == ["otter river"]


def test_the_searcher_reranks_and_explains_the_rerank_score() -> None:
    memories: list[Stored] = small_tenant()
    scores = {m.content: float(i) for i, m in enumerate(memories)}
    searcher = Searcher(
        FakeSearchStore(memories), FakeEmbedder(), Settings(_env_file=None), reranker=FixedReranker(scores)
    )

    answer = searcher.search(request())

    assert [r.content for r in answer.results] == [m.content for m in memories[::-1][:3]]
    assert [r.explanation.rerank for r in answer.results if r.explanation] == [4.0, 3.0, 2.0]


def test_the_defaults_make_no_reranker_and_no_judge() -> None:
    searcher = Searcher(FakeSearchStore(), FakeEmbedder(), Settings(_env_file=None))

    assert searcher._reranker is None and searcher._judge is None
