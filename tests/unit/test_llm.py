"""The one chat client (shared/llm/) over httpx's MockTransport: each API's endpoint, body and
answer, the Bearer key (none when empty), and a failed call raising one of ``CHAT_ERRORS``."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from shared.llm import CHAT_ERRORS, ChatApi, Message, OllamaChat, OpenAIChat, make_chat

MESSAGES: list[Message] = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]


def replying(reply: Any, seen: list[httpx.Request], status: int = 200) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, json=reply)

    return httpx.MockTransport(handle)


@pytest.mark.parametrize(
    ("api", "kind", "path", "reply", "extra"),
    [
        (
            "openai",
            OpenAIChat,
            "/v1/chat/completions",
            {"choices": [{"message": {"content": "hi"}}]},
            {"temperature": 0},
        ),
        (
            "ollama",
            OllamaChat,
            "/api/chat",
            {"message": {"content": "hi"}},
            {"stream": False, "format": "json"},
        ),
    ],
)
def test_each_api_is_asked_at_its_endpoint_and_its_answer_read(
    api: ChatApi, kind: type, path: str, reply: Any, extra: dict[str, Any]
) -> None:
    # Given a chat model of this API behind a transport
    seen: list[httpx.Request] = []
    chat = make_chat("http://llm.test", "m1", api, "k", transport=replying(reply, seen))

    # When it is asked
    answer = chat.complete(MESSAGES)

    # Then it posted the conversation to the API's endpoint, with the key, and read the answer
    assert isinstance(chat, kind)
    assert answer == "hi"
    assert seen[0].method == "POST" and seen[0].url.path == path
    assert seen[0].headers["authorization"] == "Bearer k"
    assert json.loads(seen[0].content) == {"model": "m1", "messages": MESSAGES, **extra}
    chat.close()


@pytest.mark.parametrize("key", [None, ""])
def test_no_key_sends_no_authorization(key: str | None) -> None:
    seen: list[httpx.Request] = []
    chat = make_chat(
        "http://llm.test", "m1", "ollama", key, transport=replying({"message": {"content": "x"}}, seen)
    )

    chat.complete(MESSAGES)

    assert "authorization" not in seen[0].headers


@pytest.mark.parametrize(
    ("reply", "status"),
    [({}, 503), ({"choices": []}, 200), ({"oops": 1}, 200), (["not", "an", "object"], 200)],
)
def test_a_model_down_or_answering_in_another_shape_raises_a_chat_error(reply: Any, status: int) -> None:
    chat = make_chat("http://llm.test", "m1", transport=replying(reply, [], status))

    with pytest.raises(CHAT_ERRORS):
        chat.complete(MESSAGES)


def test_a_model_that_cannot_be_reached_raises_a_chat_error() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    chat = make_chat("http://llm.test", "m1", transport=httpx.MockTransport(refuse))

    with pytest.raises(httpx.ConnectError):
        chat.complete(MESSAGES)
    assert issubclass(httpx.ConnectError, CHAT_ERRORS)
