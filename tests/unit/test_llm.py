"""The agentic round's judge and its chat backends, through httpx's MockTransport."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from shared.errors import ModelAnswerRejected, ServiceUnavailable
from shared.llm import make_judge
from shared.llm.judge import Judge, Judgement, parse, prompt
from shared.settings import Settings


def chat_server(reply: str, seen: list[dict[str, Any]], shape: str) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(
            {"path": request.url.path, "body": json.loads(request.content), "headers": request.headers}
        )
        if shape == "openai":
            return httpx.Response(
                200, json={"choices": [{"message": {"role": "assistant", "content": reply}}]}
            )
        return httpx.Response(200, json={"message": {"role": "assistant", "content": reply}, "done": True})

    return httpx.MockTransport(handle)


def judge(backend: str, transport: httpx.MockTransport, **extra: Any) -> Judge:
    settings = Settings(
        agentic_backend=backend, agentic_url="http://llm:11434", agentic_model="qwen", **extra
    )
    made = make_judge(settings, transport=transport)
    assert made is not None
    return made


def test_off_by_default() -> None:
    assert make_judge(Settings()) is None


@pytest.mark.parametrize(("backend", "path"), [("openai", "/v1/chat/completions"), ("ollama", "/api/chat")])
def test_a_judge_asks_its_chat_model_and_reads_follow_up_queries(backend: str, path: str) -> None:
    # Given a chat model that finds the results short
    seen: list[dict[str, Any]] = []
    reply = 'Sure. {"sufficient": false, "queries": ["when did Maria move to Lisbon", "Maria new job"]}'
    made = judge(backend, chat_server(reply, seen, backend), agentic_api_key="sk-2")
    # When it judges the first results
    judgement = made.judge("where does Maria work now?", ["Maria said she loves Lisbon.", "Bob cooks."])
    # Then it asked once, at temperature 0, showing the question and the memories
    assert judgement == Judgement(
        sufficient=False, queries=["when did Maria move to Lisbon", "Maria new job"]
    )
    assert seen[0]["path"] == path
    body = seen[0]["body"]
    assert body["model"] == "qwen"
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "up to 3 short search queries" in body["messages"][0]["content"]
    assert "where does Maria work now?" in body["messages"][1]["content"]
    assert "[2] Bob cooks." in body["messages"][1]["content"]
    assert seen[0]["headers"]["authorization"] == "Bearer sk-2"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"sufficient": true}', Judgement(sufficient=True)),
        (
            '```json\n{"sufficient": false, "queries": ["a", "b", "c", "d"]}\n```',
            Judgement(sufficient=False, queries=["a", "b", "c"]),
        ),
        (
            '{"sufficient": false, "queries": ["The question?", "  x  ", 7, "", "x"]}',
            Judgement(sufficient=False, queries=["x"]),
        ),
    ],
)
def test_the_judges_text_is_read_leniently(text: str, expected: Judgement) -> None:
    assert parse(text, "the question?", max_queries=3) == expected


@pytest.mark.parametrize(
    "text", ["I think so", "{not json}", '{"sufficient": "no"}', '{"sufficient": false}', "[]"]
)
def test_an_unreadable_or_empty_judgement_costs_no_second_round(text: str) -> None:
    judgement = parse(text, "q", max_queries=3)
    assert judgement.sufficient and not judgement.queries and judgement.reason


def test_follow_up_queries_are_bounded_in_length() -> None:
    judgement = parse(json.dumps({"sufficient": False, "queries": ["w " * 500]}), "q", max_queries=3)
    assert len(judgement.queries[0]) <= 256


def test_long_memories_are_cut_in_the_prompt() -> None:
    shown = prompt("q", ["word " * 1000])
    assert len(shown) < 800


def test_a_chat_model_that_is_down_or_answers_nonsense_is_translated() -> None:
    down = judge("openai", httpx.MockTransport(lambda r: httpx.Response(502)))
    with pytest.raises(ServiceUnavailable, match="chat model"):
        down.judge("q", [])
    odd = judge("openai", httpx.MockTransport(lambda r: httpx.Response(200, json={"choices": []})))
    with pytest.raises(ModelAnswerRejected):
        odd.judge("q", [])
