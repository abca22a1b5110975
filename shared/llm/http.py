"""Chat models over HTTP: any OpenAI-compatible ``/v1/chat/completions`` (OpenAI, vLLM, llama.cpp,
LM Studio, LiteLLM...) and Ollama's ``/api/chat``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import httpx

from shared.errors import ModelAnswerRejected
from shared.httpjson import client, post_json

SERVICE = "chat model"


class HttpChat(ABC):
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
        self._http = client("ENGRAM_AGENTIC_URL", url, timeout_s, transport)

    @abstractmethod
    def _payload(self, messages: list[dict[str, str]]) -> dict[str, Any]: ...

    @abstractmethod
    def _text(self, body: Any) -> Any: ...

    def complete(self, system: str, user: str) -> str:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        body = post_json(self._http, SERVICE, self.path, self._payload(messages), headers)
        try:
            text = self._text(body)
        except (KeyError, TypeError, IndexError) as exc:
            raise ModelAnswerRejected(f"{SERVICE} answered in an unknown shape: {exc!r}") from exc
        if not isinstance(text, str):
            raise ModelAnswerRejected(f"{SERVICE} answered with no text")
        return text

    def close(self) -> None:
        self._http.close()


class OpenAIChat(HttpChat):
    path = "/v1/chat/completions"

    def _payload(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        return {"model": self._model, "messages": messages, "temperature": 0}

    def _text(self, body: Any) -> Any:
        return body["choices"][0]["message"]["content"]


class OllamaChat(HttpChat):
    path = "/api/chat"

    def _payload(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        return {"model": self._model, "messages": messages, "stream": False, "options": {"temperature": 0}}

    def _text(self, body: Any) -> Any:
        return body["message"]["content"]
