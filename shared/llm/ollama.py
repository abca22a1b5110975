"""Ollama's chat endpoint: ``POST /api/chat``, one answer (no stream), asked for JSON."""

from __future__ import annotations

from typing import Any, ClassVar

from shared.llm.base import ChatApi, ChatModel, Message


class OllamaChat(ChatModel):
    api: ClassVar[ChatApi] = "ollama"
    path: ClassVar[str] = "/api/chat"

    def _body(self, messages: list[Message]) -> dict[str, Any]:
        return {"model": self.model, "messages": messages, "stream": False, "format": "json"}

    def _content(self, reply: Any) -> Any:
        return reply["message"]["content"]
