"""Chunker on the real MiniLM tokenizer: no chunk ever overflows the model, nothing is lost."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from shared.chunking import Chunker, TextChunk, counting_tokenizer
from shared.errors import ConfigurationError
from shared.settings import Settings
from shared.tokenizer import bundled_tokenizer_path, count_tokens, load_tokenizer

CORPUS = Path("/work/shared/datasets/msmarco-5k/corpus.jsonl")
_WHITESPACE = re.compile(r"\s+")

LONG_SENTENCE = " ".join(f"word{i} alpha beta gamma" for i in range(750))  # one sentence, no punctuation
SHORT_SENTENCES = " ".join(f"Sentence number {i} is short." for i in range(500))
MIXED = " ".join(
    [
        SHORT_SENTENCES[:2000],
        " ".join(["unpunctuated"] * 900),
        "Then a normal sentence. And another one!",
        " ".join(f"token{i}" for i in range(600)),
        "The end?",
    ]
)
UNICODE = (
    "这是一个关于记忆的测试句子。😀 Émile a dit: «bonjour» à Zoë!\n\n"
    "New paragraph here.\tTabbed 🎉🎉 text; Ελληνικά και русский текст.\r\n"
    "日本語の文章も入ります。한국어 문장도 있습니다. "
) * 120


@pytest.fixture(scope="module")
def settings() -> Settings:
    return Settings(_env_file=None)


@pytest.fixture(scope="module")
def model_tokenizer(settings: Settings) -> Tokenizer:
    """What the model reads: the shared tokenizer, truncation and padding off."""
    return load_tokenizer(settings)


@pytest.fixture(scope="module")
def chunker(settings: Settings, model_tokenizer: Tokenizer) -> Chunker:
    return Chunker(model_tokenizer, settings.chunk_size_tokens, settings.chunk_overlap_tokens)


@pytest.fixture(scope="module")
def corpus_texts() -> list[str]:
    with CORPUS.open(encoding="utf-8") as lines:
        return [json.loads(line)["text"] for line in itertools.islice(lines, 400)]


def _raw_bundled_tokenizer() -> Tokenizer:
    """The bundled tokenizer.json as shipped: truncation at 128 and padding to 128 switched on."""
    return Tokenizer.from_file(str(bundled_tokenizer_path()))


def _assert_fits_model(
    chunks: list[TextChunk], settings: Settings, model_tokenizer: Tokenizer, chunker: Chunker
) -> None:
    assert model_tokenizer.truncation is None, "the check must count with truncation off"
    for chunk in chunks:
        assert chunk.token_count == chunker.count_tokens(chunk.text)
        assert 0 < chunk.token_count <= settings.chunk_size_tokens
        assert count_tokens(model_tokenizer, chunk.text) <= settings.embedding_max_tokens


def _assert_no_empty_chunks(chunks: list[TextChunk]) -> None:
    assert chunks
    for chunk in chunks:
        assert chunk.text.strip() == chunk.text
        assert chunk.text


def _assert_in_text_order(chunks: list[TextChunk], text: str) -> None:
    position = 0
    for chunk in chunks:
        found = text.find(chunk.text, position)
        assert found >= 0, f"chunk is not a piece of the text after offset {position}: {chunk.text[:60]!r}"
        position = found


def _assert_every_word_covered(chunks: list[TextChunk], text: str) -> None:
    missing = [word for word in set(text.split()) if not any(word in chunk.text for chunk in chunks)]
    assert missing == []


@pytest.mark.parametrize(
    "text",
    [LONG_SENTENCE, SHORT_SENTENCES, MIXED, UNICODE],
    ids=["one-long-sentence", "many-short-sentences", "mixed", "unicode-newlines-cjk-emoji"],
)
def test_chunks_fit_the_model_cover_every_word_and_keep_text_order(
    text: str, settings: Settings, model_tokenizer: Tokenizer, chunker: Chunker
) -> None:
    # Given a text far longer than one chunk
    assert chunker.count_tokens(text) > 2 * settings.chunk_size_tokens

    # When it is chunked
    chunks = chunker.chunk(text)

    # Then no chunk overflows the model, none is empty, nothing is lost and the order is the text's
    assert len(chunks) > 1
    _assert_fits_model(chunks, settings, model_tokenizer, chunker)
    _assert_no_empty_chunks(chunks)
    _assert_every_word_covered(chunks, text)
    _assert_in_text_order(chunks, text)


def test_single_sentence_of_3000_tokens_is_cut_into_windows_that_overlap(
    settings: Settings, chunker: Chunker
) -> None:
    # Given one sentence of exactly 3000 tokens and no punctuation at all
    text = " ".join(["memory"] * 3000)
    assert chunker.count_tokens(text) == 3000

    # When it is chunked
    chunks = chunker.chunk(text)

    # Then it is cut on token boundaries into full windows sharing the configured overlap
    size, overlap = settings.chunk_size_tokens, settings.chunk_overlap_tokens
    assert all(chunk.token_count <= size for chunk in chunks)
    assert [chunk.token_count for chunk in chunks[:-1]] == [size] * (len(chunks) - 1)
    step = size - overlap
    assert len(chunks) == 1 + -(-(3000 - size) // step)  # ceil division
    assert sum(chunk.token_count for chunk in chunks) - overlap * (len(chunks) - 1) == 3000


def test_short_sentences_are_grouped_and_never_cut_mid_sentence(chunker: Chunker) -> None:
    chunks = chunker.chunk(SHORT_SENTENCES)

    assert len(chunks) < 500 / 10  # grouped, not one chunk per sentence
    for chunk in chunks:
        assert chunk.text.startswith("Sentence number ")
        assert chunk.text.endswith(" is short.")


def test_short_text_is_one_chunk_unchanged_but_stripped(chunker: Chunker) -> None:
    chunks = chunker.chunk("  The cat sat on the mat.  \n")

    assert chunks == [TextChunk("The cat sat on the mat.", 7)]


def test_blank_text_gives_no_chunks(chunker: Chunker) -> None:
    assert chunker.chunk("   \n\t  ") == []


@pytest.mark.parametrize(
    "text", ["\u200b\u200b", "\x00\x01", "\u200b \x7f \u200b"], ids=["zero-width", "nul-soh", "mixed"]
)
def test_text_the_model_cannot_see_gives_no_zero_token_chunks(text: str, chunker: Chunker) -> None:
    # Given a text that is not blank to str.strip() but has no token for the model
    # (DocumentIn accepts it; the ingest stage refuses a document that gives no chunks)
    assert text.strip() and chunker.count_tokens(text) == 0

    # When it is chunked
    chunks = chunker.chunk(text)

    # Then no empty, zero-token chunk comes out to be embedded and stored as a memory
    assert [chunk for chunk in chunks if chunk.token_count == 0] == []


@pytest.mark.parametrize("size", [16, 50, 240])
def test_without_overlap_chunks_partition_the_text_exactly(size: int, model_tokenizer: Tokenizer) -> None:
    # Given a chunker that shares nothing between neighbours
    chunker = Chunker(model_tokenizer, chunk_size=size, chunk_overlap=0)

    for text in (LONG_SENTENCE, SHORT_SENTENCES, UNICODE):
        # When a text is chunked
        chunks = chunker.chunk(text)

        # Then every non-space character is in exactly one chunk, in order
        joined = _WHITESPACE.sub("", "".join(chunk.text for chunk in chunks))
        assert joined == _WHITESPACE.sub("", text)
        assert all(0 < chunk.token_count <= size for chunk in chunks)


@pytest.mark.parametrize(("size", "overlap"), [(16, 4), (64, 8)])
def test_small_chunk_sizes_are_respected_too(size: int, overlap: int, model_tokenizer: Tokenizer) -> None:
    chunker = Chunker(model_tokenizer, chunk_size=size, chunk_overlap=overlap)

    chunks = chunker.chunk(MIXED + " " + UNICODE)

    assert max(chunk.token_count for chunk in chunks) <= size
    assert max(count_tokens(model_tokenizer, chunk.text) for chunk in chunks) <= size + 2
    _assert_no_empty_chunks(chunks)
    _assert_in_text_order(chunks, MIXED + " " + UNICODE)


def test_real_passages_each_fit_the_model_and_are_covered(
    corpus_texts: list[str], settings: Settings, model_tokenizer: Tokenizer, chunker: Chunker
) -> None:
    for text in corpus_texts:
        chunks = chunker.chunk(text)

        _assert_fits_model(chunks, settings, model_tokenizer, chunker)
        _assert_no_empty_chunks(chunks)
        _assert_every_word_covered(chunks, text)
        _assert_in_text_order(chunks, text)


def test_real_passages_joined_into_one_long_document_fit_the_model(
    corpus_texts: list[str], settings: Settings, model_tokenizer: Tokenizer, chunker: Chunker
) -> None:
    text = "\n\n".join(corpus_texts[:150])

    chunks = chunker.chunk(text)

    assert len(chunks) > 20
    _assert_fits_model(chunks, settings, model_tokenizer, chunker)
    _assert_every_word_covered(chunks, text)
    _assert_in_text_order(chunks, text)


def test_bundled_tokenizer_json_really_carries_truncation_at_128() -> None:
    # The trap the chunker guards against: this is what a naive count would see.
    raw = _raw_bundled_tokenizer()
    text = " ".join(["hello"] * 1000)

    assert raw.truncation is not None and raw.truncation["max_length"] == 128
    assert len(raw.encode(text, add_special_tokens=False).ids) == 128


def test_chunker_counts_a_1000_token_text_as_1000_even_with_a_truncating_tokenizer() -> None:
    # Given the tokenizer as shipped, truncating at 128
    raw = _raw_bundled_tokenizer()
    chunker = Chunker(raw, chunk_size=240, chunk_overlap=32)
    text = " ".join(["hello"] * 1000)

    # When the chunker counts and chunks a 1000-token text
    count = chunker.count_tokens(text)
    chunks = chunker.chunk(text)

    # Then it sees all 1000 tokens and cuts accordingly, not one 128-token-looking chunk
    assert count == 1000
    assert len(chunks) >= 5
    assert max(chunk.token_count for chunk in chunks) == 240
    assert all(count_tokens(counting_tokenizer(raw), chunk.text) <= 242 for chunk in chunks)


def test_chunker_does_not_mutate_the_tokenizer_it_is_given() -> None:
    raw = _raw_bundled_tokenizer()
    before = raw.to_str()
    truncation, padding = raw.truncation, raw.padding

    chunker = Chunker(raw, chunk_size=240, chunk_overlap=32)
    chunker.chunk(" ".join(["hello"] * 1000))

    assert raw.truncation == truncation
    assert raw.padding == padding
    assert raw.to_str() == before
    assert len(raw.encode(" ".join(["hello"] * 1000)).ids) == 128


def test_counting_tokenizer_is_a_copy_without_truncation_or_padding() -> None:
    raw = _raw_bundled_tokenizer()

    counter = counting_tokenizer(raw)

    assert counter is not raw
    assert counter.truncation is None
    assert counter.padding is None
    assert raw.truncation is not None
    assert len(counter.encode("short text").ids) == 4  # [CLS] short text [SEP], not padded to 128


def test_overlap_not_below_size_is_refused(model_tokenizer: Tokenizer) -> None:
    with pytest.raises(ConfigurationError):
        Chunker(model_tokenizer, chunk_size=32, chunk_overlap=32)
    with pytest.raises(ConfigurationError):
        Chunker(model_tokenizer, chunk_size=32, chunk_overlap=40)


@pytest.mark.parametrize(
    "text",
    [
        "x" * 1_000_000,
        "a" + " " * 100_000 + "b",
        "e" + "\u0301" * 100_000,
        "\u200b".join(["word"] * 50_000),
        ("y" * 150 + " ") * 2_000,
    ],
    ids=[
        "1MB-of-one-character",
        "a-run-of-spaces",
        "a-run-of-combining-marks",
        "zero-width-joined",
        "unk-words",
    ],
)
def test_no_chunk_holds_more_characters_than_its_bound(
    text: str, settings: Settings, chunker: Chunker
) -> None:
    # Given a text whose characters the model sees as few tokens: one overlong "word" is one [UNK],
    # white space, combining marks and zero-width characters are no token at all

    # When it is chunked
    chunks = chunker.chunk(text)

    # Then no chunk is longer than its bound in characters, and each still fits the model
    assert chunker.max_chars == settings.chunk_size_tokens * 16
    assert chunks
    assert max(len(chunk.text) for chunk in chunks) <= chunker.max_chars
    assert all(0 < chunk.token_count <= settings.chunk_size_tokens for chunk in chunks)
    _assert_no_empty_chunks(chunks)
    _assert_in_text_order(chunks, text)
