"""LocalOnnxEmbedder on the real packaged int8 model: no mocks."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from shared.embedding.base import Embedder
from shared.embedding.local import LocalOnnxEmbedder, runs
from shared.errors import ConfigurationError, InvalidInput
from shared.settings import Settings
from shared.tokenizer import count_tokens, load_tokenizer

TEXTS = [
    "A cat sat on the mat.",
    "Quarterly revenue grew by twelve percent, driven mostly by subscriptions in Europe and a "
    "strong holiday season in North America, while costs stayed flat.",
    "ok",
    "Neo4j stores the graph; Qdrant keeps a backup copy of every vector.",
    "The mitochondria is the powerhouse of the cell.",
]


def _settings(**values: object) -> Settings:
    # model_validate skips the ENGRAM_* environment and .env: the tests see defaults only.
    return Settings.model_validate(values)


@pytest.fixture(scope="module", params=["int8", "float"])
def settings(request: pytest.FixtureRequest) -> Settings:
    return _settings(embedding_batch_size=2, local_compute=request.param)


@pytest.fixture(scope="module")
def embedder(settings: Settings) -> LocalOnnxEmbedder:
    return LocalOnnxEmbedder(settings)


def test_implements_the_protocol(embedder: LocalOnnxEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    assert embedder.model_name == "all-MiniLM-L6-v2"
    assert embedder.dimension == 384


def test_shape_dtype_and_unit_length(embedder: LocalOnnxEmbedder) -> None:
    vectors = embedder.embed(TEXTS)
    assert vectors.shape == (len(TEXTS), 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_empty_input_gives_an_empty_matrix(embedder: LocalOnnxEmbedder) -> None:
    assert embedder.embed([]).shape == (0, 384)


def test_order_survives_length_sorting_and_batching(embedder: LocalOnnxEmbedder) -> None:
    # Batch size 2 and texts of mixed lengths: every text lands in a different batch and
    # padding width than when embedded alone.
    together = embedder.embed(TEXTS)
    alone = np.stack([embedder.embed([t])[0] for t in TEXTS])
    np.testing.assert_allclose(together, alone, atol=1e-4)
    reversed_ = embedder.embed(TEXTS[::-1])
    np.testing.assert_allclose(reversed_[::-1], together, atol=1e-4)


def test_runs_hold_few_long_texts_and_many_short_ones() -> None:
    # Lengths longest first, at most 512 padded tokens (texts x the run's longest) and 4 texts a run
    lengths = [240, 200, 130, 100, 100, 60, 11, 11, 11, 11, 11, 9]

    found = runs(lengths, max_texts=4, max_tokens=512)

    # Then each run is as long as both bounds allow, and a text longer than the bound runs alone
    assert found == [(0, 2), (2, 5), (5, 9), (9, 12)]
    assert runs([600, 500], max_texts=4, max_tokens=512) == [(0, 1), (1, 2)]
    assert runs([], max_texts=4, max_tokens=512) == []


@pytest.mark.parametrize("compute", ["int8", "float"])
def test_vectors_do_not_depend_on_the_runs_or_the_threads(compute: str) -> None:
    # Runs of one to four texts (float; int8 runs each alone), side by side on two threads,
    # against each text alone
    texts = TEXTS * 3
    embedder = LocalOnnxEmbedder(_settings(local_threads=2, local_run_tokens=64, local_compute=compute))
    together = embedder.embed(texts)
    alone = np.stack([embedder.embed([t])[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-4)
    np.testing.assert_allclose(embedder.embed(texts[::-1])[::-1], together, atol=1e-4)


def test_paraphrase_is_nearer_than_an_unrelated_sentence(embedder: LocalOnnxEmbedder) -> None:
    anchor, paraphrase, unrelated = embedder.embed(
        [
            "How do I reset my password?",
            "I forgot my password, how can I change it?",
            "The train to Lyon leaves at nine in the morning.",
        ]
    )
    assert float(anchor @ paraphrase) > float(anchor @ unrelated) + 0.3


def test_text_past_the_limit_is_truncated(embedder: LocalOnnxEmbedder, settings: Settings) -> None:
    tokenizer = load_tokenizer(settings)
    head = " ".join(f"word{i}" for i in range(400))
    long_text = head + " and then something entirely different about volcanoes"
    assert count_tokens(tokenizer, long_text) > settings.embedding_max_tokens
    (long_vector, head_vector) = embedder.embed([long_text, head])
    assert np.isfinite(long_vector).all()
    # Only the first 256 tokens are read, and both texts share them.
    np.testing.assert_allclose(long_vector, head_vector, atol=1e-4)


def test_embed_query_equals_embed_of_one(embedder: LocalOnnxEmbedder) -> None:
    query = "where is the powerhouse of the cell"
    np.testing.assert_array_equal(embedder.embed_query(query), embedder.embed([query])[0])
    assert embedder.embed_query(query).shape == (384,)


def test_one_string_is_refused(embedder: LocalOnnxEmbedder) -> None:
    with pytest.raises(InvalidInput):
        embedder.embed("not a list")


def test_missing_model_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.onnx"
    with pytest.raises(ConfigurationError, match=r"nope\.onnx"):
        LocalOnnxEmbedder(_settings(local_model_path=missing))


def test_corrupt_model_file_is_a_configuration_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(ConfigurationError, match=r"bad\.onnx"):
        LocalOnnxEmbedder(_settings(local_model_path=bad))


def test_tokenizer_counts_special_tokens_without_its_shipped_limits(settings: Settings) -> None:
    tokenizer = load_tokenizer(settings)
    assert count_tokens(tokenizer, "") == 2  # [CLS] and [SEP]
    # The bundled tokenizer.json truncates and pads to 128 unless load_tokenizer turns that off.
    assert count_tokens(tokenizer, "hello world") == 4
    assert count_tokens(tokenizer, "word " * 300) == 302
    assert load_tokenizer(settings) is tokenizer


def test_missing_tokenizer_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "tokenizer.json"
    with pytest.raises(ConfigurationError, match=re.escape(str(missing))):
        load_tokenizer(_settings(embedding_tokenizer_path=missing))
