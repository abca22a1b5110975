"""The local model's int8 copy (shared/embedding/int8.py) on the real packaged model: made once
into its cache, shared by processes starting at once, and its vectors those of the model."""

from __future__ import annotations

import multiprocessing
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

from shared.embedding.int8 import int8_model
from shared.embedding.local import LocalOnnxEmbedder, default_model_path
from shared.errors import ConfigurationError
from shared.settings import Settings

TEXTS = [
    "Caroline went to the LGBTQ support group in Boston yesterday.",
    "Quarterly revenue grew by twelve percent, driven mostly by subscriptions in Europe.",
    "ok",
    "Neo4j stores the graph; Qdrant keeps a backup copy of every vector.",
    "How do I reset my password?",
    "I forgot my password, how can I change it?",
    "The train to Lyon leaves at nine in the morning.",
]


def _embedder(cache: Path, compute: str, **values: object) -> LocalOnnxEmbedder:
    return LocalOnnxEmbedder(
        Settings.model_validate({"local_compute": compute, "local_model_cache": cache, **values})
    )


def _make(source: str, cache: str) -> str:
    return str(int8_model(Path(source), Path(cache)))


def test_the_copy_is_made_once_with_integer_products(tmp_path: Path) -> None:
    # Given an empty cache
    source = default_model_path()

    # When the copy is asked for twice
    first = int8_model(source, tmp_path)
    made = first.stat().st_mtime_ns
    second = int8_model(source, tmp_path)

    # Then it was made once, beside nothing half-written, and its products are integer ones
    assert second == first and first.stat().st_mtime_ns == made
    assert sorted(p.name for p in tmp_path.iterdir()) == [first.name, f"{first.name}.lock"]
    graph = onnx.load(str(first)).graph
    assert {"MatMulInteger", "DynamicQuantizeLinear"} <= {node.op_type for node in graph.node}
    # But for the feed-forward's second product of the first three layers (of six), kept in float
    weights = {i.name: tuple(i.dims) for i in graph.initializer}
    in_float = [weights[n.input[1]] for n in graph.node if n.op_type == "MatMul" and n.input[1] in weights]
    assert in_float == [(1536, 384)] * 3


def test_the_copy_is_named_by_the_contents_not_the_path(tmp_path: Path) -> None:
    # Given the same model under another name, and the cache of the first
    source = default_model_path()
    other = tmp_path / "elsewhere" / source.name
    other.parent.mkdir()
    shutil.copyfile(source, other)
    cache = tmp_path / "cache"

    # Then both name the same copy
    assert int8_model(other, cache) == int8_model(source, cache)


def test_processes_starting_at_once_make_it_once(tmp_path: Path) -> None:
    # When four processes ask for the copy of an empty cache at the same moment
    source, cache = str(default_model_path()), str(tmp_path)
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        paths = pool.starmap(_make, [(source, cache)] * 4)

    # Then they name one file, whole (onnx reads it), and no temporary folder is left
    assert len(set(paths)) == 1
    onnx.checker.check_model(paths[0])
    assert len(list(tmp_path.glob("*.onnx"))) == 1 and not list(tmp_path.glob(".int8-*"))


def test_a_cache_that_cannot_be_written_says_what_to_set(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    with pytest.raises(ConfigurationError, match="ENGRAM_LOCAL_MODEL_CACHE"):
        int8_model(default_model_path(), blocked / "models")


def test_a_file_the_quantizer_cannot_read_says_so(tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(ConfigurationError, match=r"bad\.onnx.*ENGRAM_LOCAL_COMPUTE=float"):
        int8_model(bad, tmp_path / "cache")
    assert not list((tmp_path / "cache").glob("*.onnx"))


def test_int8_vectors_are_the_models(tmp_path: Path) -> None:
    # Given the model in float and in int8
    exact = _embedder(tmp_path, "float").embed(TEXTS)
    int8 = _embedder(tmp_path, "int8").embed(TEXTS)

    # Then each text's two vectors point the same way (the kit's sets: cosine 0.995 on average)
    cosines = (exact * int8).sum(axis=1)
    assert cosines.min() > 0.98, cosines
    # And the texts are as near each other in both, the paraphrases nearest of all
    np.testing.assert_allclose(int8 @ int8.T, exact @ exact.T, atol=0.03)
    similar = int8 @ int8.T - 2 * np.eye(len(TEXTS))
    assert similar[4].argmax() == 5 and similar[5].argmax() == 4


def test_an_int8_vector_does_not_depend_on_what_it_was_embedded_with(tmp_path: Path) -> None:
    # Given the int8 model, runs of up to 32 texts asked for, on two threads
    embedder = _embedder(tmp_path, "int8", local_threads=2, embedding_batch_size=32)

    # When the texts are embedded together, reversed, and each alone
    together = embedder.embed(TEXTS * 2)
    reversed_ = embedder.embed(TEXTS[::-1] * 2)
    alone = np.stack([embedder.embed_query(t) for t in TEXTS * 2])

    # Then each text has one vector (each text runs alone: an activation's scale is its run's)
    np.testing.assert_array_equal(together, alone)
    np.testing.assert_array_equal(reversed_[: len(TEXTS)][::-1], alone[: len(TEXTS)])
