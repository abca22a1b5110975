"""Hugging Face text-embeddings-inference (TEI): ``POST /embed``."""

from __future__ import annotations

from typing import Any, ClassVar

from shared.embedding.http import HttpEmbedder, MalformedAnswer


class TeiEmbedder(HttpEmbedder):
    """Embeds with a TEI server; the model is the one the server was started with."""

    backend: ClassVar[str] = "tei"
    path: ClassVar[str] = "/embed"
    hint: ClassVar[str] = "start text-embeddings-inference with the model, or fix ENGRAM_EMBEDDING_URL"

    def _payload(self, texts: list[str]) -> dict[str, Any]:
        # Chunks are sized by the model's own tokenizer: an input too long is a bug to surface,
        # not something to cut silently.
        return {"inputs": texts, "normalize": True, "truncate": False}

    def _vectors(self, body: Any, count: int) -> list[Any]:
        if not isinstance(body, list):
            raise MalformedAnswer("expected a JSON list of vectors")
        return body
