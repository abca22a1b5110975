"""What both chat APIs share: the HTTP client, the Bearer key, asking and reading one answer.

An adapter names its endpoint, builds the JSON body of one conversation and pulls the answer's
text out of the reply; the rest lives here once. Used by the LLM entity extractor
(shared/graph/extractors.py) and the agentic search's judge (shared/search/agentic.py), which
decide themselves what a failed call means (the built-in extractor; no second round).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import httpx

ChatApi = Literal["openai", "ollama"]

Message = dict[str, str]
"""One turn of the conversation: ``{"role": "system" | "user", "content": ...}``."""

CHAT_ERRORS: tuple[type[Exception], ...] = (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError)
"""What ``ChatModel.complete`` raises when the model cannot be asked or its reply is not one:
the network or an error status (``httpx.HTTPError``), a reply of another shape, JSON that is not."""


class ChatModel(ABC):
    """A chat model behind an HTTP endpoint, asked for one answer at temperature 0 or as JSON.

    Pass ``transport`` (in tests an ``httpx.MockTransport``) to replace the network.
    """

    api: ClassVar[ChatApi]
    path: ClassVar[str]

    def __init__(
        self,
        url: str,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(base_url=url, headers=headers, timeout=timeout_s, transport=transport)
        self.model = model

    def complete(self, messages: Sequence[Message]) -> str:
        """The model's answer to the conversation; raises one of ``CHAT_ERRORS`` when it has none."""
        response = self._client.post(self.path, json=self._body(list(messages)))
        response.raise_for_status()
        return str(self._content(response.json()))

    @abstractmethod
    def _body(self, messages: list[Message]) -> dict[str, Any]: ...

    @abstractmethod
    def _content(self, reply: Any) -> Any: ...

    def close(self) -> None:
        self._client.close()
