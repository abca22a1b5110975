"""Ollama: ``POST /api/embed``."""

from __future__ import annotations

from typing import Any, ClassVar

from shared.embedding.http import HttpEmbedder, MalformedAnswer


class OllamaEmbedder(HttpEmbedder):
    """Embeds with an Ollama server and the model named by ``ENGRAM_EMBEDDING_MODEL``."""

    backend: ClassVar[str] = "ollama"
    path: ClassVar[str] = "/api/embed"
    hint: ClassVar[str] = "run `ollama serve` and `ollama pull` the model, or fix ENGRAM_EMBEDDING_URL"

    def _payload(self, texts: list[str]) -> dict[str, Any]:
        # Chunks are sized by the model's tokenizer already; Ollama would otherwise cut silently.
        return {"model": self.model_name, "input": texts, "truncate": False}

    def _vectors(self, body: Any, count: int) -> list[Any]:
        embeddings = body.get("embeddings") if isinstance(body, dict) else None
        if not isinstance(embeddings, list):
            raise MalformedAnswer('expected an object with an "embeddings" list')
        return embeddings
