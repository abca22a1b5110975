"""Sentence-aware chunking sized by the embedding model's own tokenizer.

Chunks are counted with the very tokenizer the model reads, so no chunk is ever truncated by the
model. Three traps are closed here: a tokenizer.json may carry its own truncation (MiniLM's cuts at
128), which would make every chunk *look* short; chonkie keeps one over-long sentence whole, so
such a chunk is cut again on token boundaries; and few tokens can hold any number of characters
(a "word" over 100 characters is one [UNK], white space, combining marks and zero-width characters
are no token at all), so a chunk is also bounded in characters: ``MAX_CHARS_PER_TOKEN`` per token
of the chunk size.

With ``sections`` (ENGRAM_CHUNK_SECTIONS), a text of paragraphs (blank lines between them) is
chunked as ``shared.paragraphs`` lays it out: runs of whole paragraphs that fit a chunk, cut where
the paragraphs' own words say, so an edit of one paragraph re-chunks only the chunk that held it
and its neighbour's (the exact bound is there); a paragraph over a chunk is chunked by sentences
on its own. A text without blank lines is one paragraph, chunked as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate
from typing import Any, cast

from chonkie import SentenceChunker
from tokenizers import Tokenizer

from shared.errors import ConfigurationError
from shared.paragraphs import anchor_key, layout, paragraph_spans

# Prose runs at 4-7 characters a token (MS MARCO passages and ops/sample: 4.6 on average, 6.7 at
# most), code at about 4: a chunk of 240 tokens is at most 3,840 characters, more than twice what
# real text needs, so only text the model cannot see is cut by it (1 MB of "x" is one [UNK]).
MAX_CHARS_PER_TOKEN = 16


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
    """Splits text into chunks of at most ``chunk_size`` tokens (special tokens not counted) and
    ``max_chars`` characters."""

    def __init__(
        self, tokenizer: Tokenizer, chunk_size: int, chunk_overlap: int, sections: bool = False
    ) -> None:
        if chunk_overlap >= chunk_size:
            raise ConfigurationError("chunk overlap must be below the chunk size")
        self._tokenizer = counting_tokenizer(tokenizer)
        self._chunk_size = chunk_size
        self._overlap = chunk_overlap
        self._by_sections = sections
        self.max_chars = chunk_size * MAX_CHARS_PER_TOKEN
        self._sentences = SentenceChunker(
            tokenizer=cast(Any, self._tokenizer), chunk_size=chunk_size, chunk_overlap=chunk_overlap
        )

    def count_tokens(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def chunk(self, text: str) -> list[TextChunk]:
        if not self._by_sections:
            return self._chunk(text)
        return [chunk for _, chunks in self.runs(text) for chunk in chunks]

    def runs(self, text: str) -> list[tuple[tuple[int, int], list[TextChunk]]]:
        """Each run of whole paragraphs (first and last index in ``paragraph_spans(text)``) and its
        chunks: one, or a single paragraph's sentence chunks. A run fits when its paragraphs' token
        counts add up to a chunk (what MiniLM's WordPiece counts for the run itself; a sum, so a
        run never fits where a longer one holding it does not)."""
        spans = paragraph_spans(text)
        pieces = [text[start:end] for start, end in spans]
        before = list(accumulate(self._count_each(pieces), initial=0))

        def fits(first: int, last: int) -> bool:
            chars = spans[last][1] - spans[first][0]
            return before[last + 1] - before[first] <= self._chunk_size and chars <= self.max_chars

        runs = layout([anchor_key(piece) for piece in pieces], fits)
        whole = [text[spans[first][0] : spans[last][1]] for first, last in runs]
        counts = self._count_each(whole)
        return [
            (run, self._one_chunk(piece, count) if fits(*run) else self._chunk(piece))
            for run, piece, count in zip(runs, whole, counts, strict=True)
        ]

    def _one_chunk(self, piece: str, count: int) -> list[TextChunk]:
        if count > self._chunk_size:  # a tokenizer that counts a run above its parts' sum
            return self._chunk(piece)
        return [TextChunk(piece, count)] if count else []

    def _count_each(self, texts: list[str]) -> list[int]:
        encoded = self._tokenizer.encode_batch(texts, add_special_tokens=False)
        return [len(one.ids) for one in encoded]

    def _chunk(self, text: str) -> list[TextChunk]:
        placed: list[_Placed] = []
        for piece in self._sentences.chunk(text):
            content, at = _stripped(piece.text)
            if content:
                placed.extend(
                    (piece.start_index + at + offset, chunk) for offset, chunk in self._fit(content)
                )
        # chonkie's overlap starts a piece inside the one before: when that one is cut on characters,
        # a part of it may start after the next piece does. Chunks come in the order they start.
        placed.sort(key=lambda item: item[0])
        return [chunk for _, chunk in placed]

    def _fit(self, content: str) -> list[_Placed]:
        """``content`` as chunks within both bounds: cut on tokens, then any window still over
        ``max_chars`` cut on characters (and on tokens again if a cut word now counts more)."""
        count = self.count_tokens(content)
        if count == 0:
            return []  # nothing the model can see (zero-width or control characters only)
        if count <= self._chunk_size:
            windows: list[_Placed] = [(0, TextChunk(content, count))]
        else:
            windows = self._split_by_tokens(content)
        fitted: list[_Placed] = []
        for at, window in windows:
            if len(window.text) <= self.max_chars:
                fitted.append((at, window))
                continue
            for part_at, part in self._split_by_chars(window.text):
                count = self.count_tokens(part)
                if 0 < count <= self._chunk_size:
                    fitted.append((at + part_at, TextChunk(part, count)))
                elif count:  # pieces of a part: within max_chars
                    fitted.extend((at + part_at + sub_at, sub) for sub_at, sub in self._split_by_tokens(part))
        return fitted

    def _split_by_chars(self, text: str) -> list[tuple[int, str]]:
        """Stripped pieces of at most ``max_chars`` characters, cut at the last white space of a
        window when there is one in its second half, else mid-"word"; empty pieces dropped."""
        pieces: list[tuple[int, str]] = []
        start, end_of_text = 0, len(text)
        while start < end_of_text:
            end = min(start + self.max_chars, end_of_text)
            if end < end_of_text:
                end = _after_last_space(text, start + self.max_chars // 2, end)
            content, at = _stripped(text[start:end])
            if content:
                pieces.append((start + at, content))
            start = end
        return pieces

    def _split_by_tokens(self, text: str) -> list[_Placed]:
        """Windows of ``chunk_size`` tokens with the configured overlap, cut at token offsets."""
        offsets = self._tokenizer.encode(text, add_special_tokens=False).offsets
        windows: list[_Placed] = []
        start = 0
        while start < len(offsets):
            end = min(start + self._chunk_size, len(offsets))
            content, at = _stripped(text[offsets[start][0] : offsets[end - 1][1]])
            # Re-tokenising a cut can merge or split differently at the edges: shrink until it fits.
            count = self.count_tokens(content)
            while count > self._chunk_size and end - 1 > start:
                end -= 1
                content, at = _stripped(text[offsets[start][0] : offsets[end - 1][1]])
                count = self.count_tokens(content)
            if content and count:
                windows.append((offsets[start][0] + at, TextChunk(content, count)))
            if end >= len(offsets):
                break
            start = max(end - self._overlap, start + 1)
        return windows


# A chunk and where it starts in the text being chunked.
_Placed = tuple[int, TextChunk]


def _stripped(text: str) -> tuple[str, int]:
    """``text`` without white space at either end, and where that begins in ``text``."""
    content = text.lstrip()
    return content.rstrip(), len(text) - len(content)


def _after_last_space(text: str, low: int, high: int) -> int:
    """The index after the last white space in ``text[low:high]``, else ``high``."""
    for index in range(high - 1, low - 1, -1):
        if text[index].isspace():
            return index + 1
    return high
