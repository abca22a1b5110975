"""Properties of the chunker on the real MiniLM tokenizer, over any text: every chunk fits the
model in tokens and its bound in characters, none is empty, they come in the text's order, and
without overlap they hold every character the model can see."""

from __future__ import annotations

from functools import cache

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from shared.chunking import MAX_CHARS_PER_TOKEN, Chunker, TextChunk
from shared.settings import Settings
from shared.tokenizer import load_tokenizer

SIZE, OVERLAP = 16, 4  # small, so short texts cross every bound


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return load_tokenizer(Settings(_env_file=None))


WORDS = st.sampled_from(
    ["memory", "the", "cat.", "Hello!", "東京", "😀", "naïve", "x" * 130, "Straße?", "\n\n"]
)
TEXTS = st.one_of(
    st.text(max_size=600),
    st.lists(WORDS, max_size=120).map(" ".join),
    st.lists(st.text(max_size=30) | WORDS, max_size=60).map(" ".join),
    st.tuples(st.sampled_from("x \u0301\u200b."), st.integers(1, 1500), WORDS).map(
        lambda t: t[2] + t[0] * t[1] + t[2]
    ),
)
TEXT_SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _assert_within_bounds(chunks: list[TextChunk], chunker: Chunker) -> None:
    for chunk in chunks:
        assert chunk.text and chunk.text == chunk.text.strip()
        assert 0 < chunk.token_count == chunker.count_tokens(chunk.text) <= SIZE
        assert len(chunk.text) <= chunker.max_chars == SIZE * MAX_CHARS_PER_TOKEN


# Found by this test: a piece cut on characters had a part after the start of chonkie's next piece.
OUT_OF_ORDER = "0" * 23 + ":" + "0" * 123 + "? EMORY " + "0" * 100 + "1\n" + "0" * 12


@given(text=TEXTS)
@example(text=OUT_OF_ORDER)
@TEXT_SETTINGS
def test_every_chunk_fits_both_bounds_and_they_keep_the_texts_order(text: str, tokenizer: Tokenizer) -> None:
    # Given any text, and the chunker with overlap
    chunker = Chunker(tokenizer, SIZE, OVERLAP)

    # When it is chunked
    chunks = chunker.chunk(text)

    # Then each chunk is within its bounds in tokens and characters, none is empty, and each is a
    # piece of the text found at or after the one before it
    _assert_within_bounds(chunks, chunker)
    position = 0
    for chunk in chunks:
        position = text.find(chunk.text, position)
        assert position >= 0, chunk.text


@given(text=TEXTS)
@TEXT_SETTINGS
def test_without_overlap_chunks_hold_every_character_the_model_sees_once_in_order(
    text: str, tokenizer: Tokenizer
) -> None:
    # Given any text, and a chunker whose neighbouring chunks share nothing
    chunker = Chunker(tokenizer, SIZE, 0)

    @cache
    def seen(character: str) -> bool:
        return not character.isspace() and chunker.count_tokens(character) > 0

    # When it is chunked
    chunks = chunker.chunk(text)

    # Then the characters the model sees are those of the chunks, in the same order
    _assert_within_bounds(chunks, chunker)
    in_chunks = [c for chunk in chunks for c in chunk.text if seen(c)]
    assert in_chunks == [c for c in text if seen(c)]
