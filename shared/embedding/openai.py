"""Any OpenAI-compatible embeddings server: ``POST /v1/embeddings``."""

from __future__ import annotations

from typing import Any, ClassVar

from shared.embedding.http import HttpEmbedder, MalformedAnswer


class OpenAIEmbedder(HttpEmbedder):
    """Embeds with an OpenAI-compatible server (OpenAI, vLLM, LiteLLM, LocalAI, ...).

    ``ENGRAM_EMBEDDING_URL`` may be the server root or already end in ``/v1``.
    """

    backend: ClassVar[str] = "openai"
    path: ClassVar[str] = "/v1/embeddings"
    hint: ClassVar[str] = "check ENGRAM_EMBEDDING_URL, ENGRAM_EMBEDDING_MODEL and ENGRAM_EMBEDDING_API_KEY"

    def _path(self) -> str:
        if self._client.base_url.path.rstrip("/").endswith("/v1"):
            return "/embeddings"
        return self.path

    def _headers(self) -> dict[str, str]:
        key = self._settings.embedding_api_key
        if key is None or not key.get_secret_value():
            return {}
        return {"Authorization": f"Bearer {key.get_secret_value()}"}

    def _payload(self, texts: list[str]) -> dict[str, Any]:
        return {"model": self.model_name, "input": texts}

    def _vectors(self, body: Any, count: int) -> list[Any]:
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise MalformedAnswer('expected an object with a "data" list')
        by_index: dict[int, Any] = {}
        for item in data:
            index = item.get("index") if isinstance(item, dict) else None
            # bool is an int too, and a JSON true is no index.
            if not isinstance(index, int) or isinstance(index, bool):
                raise MalformedAnswer('expected "data" items with an integer "index"')
            if not 0 <= index < count or index in by_index:
                raise MalformedAnswer(f'"index" {index} is out of range or repeated')
            by_index[index] = item.get("embedding")
        # The spec does not promise the items come in input order.
        return [by_index[i] for i in sorted(by_index)]
