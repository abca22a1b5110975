"""Chat models, one client for every caller: an OpenAI-compatible endpoint or Ollama's, chosen by
the caller's ``*_API`` setting (``ENGRAM_GRAPH_LLM_API``, ``ENGRAM_SEARCH_AGENT_API``)."""

from __future__ import annotations

from typing import assert_never

import httpx

from shared.llm.base import CHAT_ERRORS, ChatApi, ChatModel, Message
from shared.llm.ollama import OllamaChat
from shared.llm.openai import OpenAIChat


def make_chat(
    url: str,
    model: str,
    api: ChatApi = "openai",
    api_key: str | None = None,
    timeout_s: float = 30.0,
    transport: httpx.BaseTransport | None = None,
) -> ChatModel:
    """The client of ``api`` at ``url``; ``transport`` replaces the network."""
    if api == "openai":
        return OpenAIChat(url, model, api_key, timeout_s, transport)
    if api == "ollama":
        return OllamaChat(url, model, api_key, timeout_s, transport)
    assert_never(api)


__all__ = ["CHAT_ERRORS", "ChatApi", "ChatModel", "Message", "OllamaChat", "OpenAIChat", "make_chat"]
