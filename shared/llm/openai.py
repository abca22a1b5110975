"""An OpenAI-compatible chat endpoint: ``POST /v1/chat/completions``, at temperature 0."""

from __future__ import annotations

from typing import Any, ClassVar

from shared.llm.base import ChatApi, ChatModel, Message


class OpenAIChat(ChatModel):
    api: ClassVar[ChatApi] = "openai"
    path: ClassVar[str] = "/v1/chat/completions"

    def _body(self, messages: list[Message]) -> dict[str, Any]:
        return {"model": self.model, "messages": messages, "temperature": 0}

    def _content(self, reply: Any) -> Any:
        return reply["choices"][0]["message"]["content"]
