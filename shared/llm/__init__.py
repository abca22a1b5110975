"""Optional chat models, for the agentic second round of search (``ENGRAM_AGENTIC_BACKEND``, off
by default: no chat model ships offline with Engram)."""

from __future__ import annotations

from typing import assert_never

import httpx

from shared.llm.base import ChatModel
from shared.llm.judge import Judge, Judgement
from shared.settings import Settings


def make_judge(settings: Settings, transport: httpx.BaseTransport | None = None) -> Judge | None:
    backend = settings.agentic_backend
    if backend == "none":
        return None
    from shared.llm.http import OllamaChat, OpenAIChat

    key = settings.agentic_api_key.get_secret_value() if settings.agentic_api_key else None
    args = (settings.agentic_url, settings.agentic_model, key, settings.agentic_timeout_s)
    chat: ChatModel
    if backend == "openai":
        chat = OpenAIChat(*args, transport=transport)
    elif backend == "ollama":
        chat = OllamaChat(*args, transport=transport)
    else:
        assert_never(backend)
    return Judge(chat, settings.agentic_max_queries)


__all__ = ["ChatModel", "Judge", "Judgement", "make_judge"]
