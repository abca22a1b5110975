"""Sentence-aware chunking sized by the embedding model's own tokenizer.

Chunks are counted with the very tokenizer the model reads, so no chunk is ever truncated by the
model. Two traps are closed here: a tokenizer.json may carry its own truncation (MiniLM's cuts at
128), which would make every chunk *look* short; and chonkie keeps one over-long sentence whole,
so such a chunk is cut again on token boundaries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from chonkie import SentenceChunker
from tokenizers import Tokenizer

from shared.errors import ConfigurationError


@dataclass(frozen=True, slots=True)
class TextChunk:
    text: str
    token_count: int


def counting_tokenizer(tokenizer: Tokenizer) -> Tokenizer:
    """A copy that counts every token: no truncation, no padding."""
    counter = Tokenizer.from_str(tokenizer.to_str())
    counter.no_truncation()
    counter.no_padding()
    return counter


class Chunker:
    """Splits text into chunks of at most ``chunk_size`` tokens (special tokens not counted)."""

    def __init__(self, tokenizer: Tokenizer, chunk_size: int, chunk_overlap: int) -> None:
        if chunk_overlap >= chunk_size:
            raise ConfigurationError("chunk overlap must be below the chunk size")
        self._tokenizer = counting_tokenizer(tokenizer)
        self._chunk_size = chunk_size
        self._overlap = chunk_overlap
        self._sentences = SentenceChunker(
            tokenizer=cast(Any, self._tokenizer), chunk_size=chunk_size, chunk_overlap=chunk_overlap
        )

    def count_tokens(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def chunk(self, text: str) -> list[TextChunk]:
        chunks: list[TextChunk] = []
        for piece in self._sentences.chunk(text):
            content = piece.text.strip()
            if not content:
                continue
            count = self.count_tokens(content)
            if count == 0:
                continue  # nothing the model can see (zero-width or control characters only)
            if count <= self._chunk_size:
                chunks.append(TextChunk(content, count))
            else:
                chunks.extend(self._split_by_tokens(content))
        return chunks

    def _split_by_tokens(self, text: str) -> list[TextChunk]:
        """Windows of ``chunk_size`` tokens with the configured overlap, cut at token offsets."""
        offsets = self._tokenizer.encode(text, add_special_tokens=False).offsets
        windows: list[TextChunk] = []
        start = 0
        while start < len(offsets):
            end = min(start + self._chunk_size, len(offsets))
            content = text[offsets[start][0] : offsets[end - 1][1]].strip()
            # Re-tokenising a cut can merge or split differently at the edges: shrink until it fits.
            count = self.count_tokens(content)
            while count > self._chunk_size and end - 1 > start:
                end -= 1
                content = text[offsets[start][0] : offsets[end - 1][1]].strip()
                count = self.count_tokens(content)
            if content and count:
                windows.append(TextChunk(content, count))
            if end >= len(offsets):
                break
            start = max(end - self._overlap, start + 1)
        return windows
