"""The HTTP embedding backends against fake servers behind ``httpx.MockTransport``.

Each fake answers like the real service (TEI, Ollama, an OpenAI-compatible server): it checks the
method and path, reads the texts from the JSON body and returns deterministic vectors, or the
failures a test scripts first.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
import pytest

from shared.embedding import Embedder, make_embedder
from shared.embedding.http import HttpEmbedder
from shared.embedding.ollama import OllamaEmbedder
from shared.embedding.openai import OpenAIEmbedder
from shared.embedding.tei import TeiEmbedder
from shared.errors import ConfigurationError, EmbeddingRejected, ServiceUnavailable
from shared.settings import Settings

MODEL = "test-embed-model"
DIM = 6
BACKENDS = ["tei", "ollama", "openai"]
CLASSES: dict[str, type[HttpEmbedder]] = {
    "tei": TeiEmbedder,
    "ollama": OllamaEmbedder,
    "openai": OpenAIEmbedder,
}
URLS = {
    "tei": "http://tei.test",
    "ollama": "http://ollama.test:11434",
    "openai": "http://openai.test",
}
PATHS = {"tei": "/embed", "ollama": "/api/embed", "openai": "/v1/embeddings"}

Failure = int | type[httpx.RequestError] | httpx.Response


@pytest.fixture(autouse=True)
def _no_engram_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("ENGRAM_"):
            monkeypatch.delenv(name)


def vector_for(text: str, dim: int = DIM) -> list[float]:
    seed = sum(ord(c) * (i + 1) for i, c in enumerate(text))
    return [float((seed * (k + 3)) % 11 + 1) for k in range(dim)]


def expected(texts: list[str]) -> npt.NDArray[np.float64]:
    raw = np.array([vector_for(t) for t in texts], dtype=np.float64)
    unit: npt.NDArray[np.float64] = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    return unit


def texts_in(backend: str, body: dict[str, Any]) -> list[str]:
    texts = body["inputs"] if backend == "tei" else body["input"]
    assert isinstance(texts, list)
    return texts


def answer(backend: str, vectors: list[list[float]], *, reverse: bool = False) -> Any:
    if backend == "tei":
        return vectors
    if backend == "ollama":
        return {"model": MODEL, "embeddings": vectors, "total_duration": 1, "load_duration": 1}
    items = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
    if reverse:
        items.reverse()
    return {
        "object": "list",
        "data": items,
        "model": MODEL,
        "usage": {"prompt_tokens": 1, "total_tokens": 1},
    }


class FakeServer:
    """A handler for ``httpx.MockTransport`` that plays one embedding server."""

    def __init__(
        self,
        backend: str,
        *,
        prefix: str = "",
        failures: list[Failure] | None = None,
        reverse: bool = False,
        dim: int = DIM,
        api_key: str | None = None,
    ) -> None:
        self.backend = backend
        self.path = prefix + PATHS[backend]
        self.failures = list(failures or [])
        self.reverse = reverse
        self.dim = dim
        self.api_key = api_key
        self.requests: list[httpx.Request] = []
        self.answers: list[Any] = []

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests]

    def batches(self) -> list[list[str]]:
        return [texts_in(self.backend, b) for b in self.bodies()]

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.method != "POST" or request.url.path != self.path:
            return httpx.Response(404, text="404 page not found")
        if self.api_key is not None and request.headers.get("authorization") != f"Bearer {self.api_key}":
            return httpx.Response(401, json={"error": {"message": "Incorrect API key provided"}})
        if self.failures:
            failure = self.failures.pop(0)
            if isinstance(failure, httpx.Response):
                return failure
            if isinstance(failure, int):
                return httpx.Response(failure, json={"error": f"status {failure}"})
            raise failure("simulated", request=request)
        texts = texts_in(self.backend, json.loads(request.content))
        vectors = [vector_for(t, self.dim) for t in texts]
        self.answers.append(answer(self.backend, vectors, reverse=self.reverse))
        return httpx.Response(200, json=self.answers[-1])


def settings_for(backend: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "embedding_backend": backend,
        "embedding_url": URLS[backend],
        "embedding_model": MODEL,
        **overrides,
    }
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


class Recorder:
    """Stands in for ``time.sleep``: remembers the delays instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def build(backend: str, server: FakeServer, sleep: Recorder | None = None, **overrides: Any) -> HttpEmbedder:
    return CLASSES[backend](
        settings_for(backend, **overrides),
        transport=httpx.MockTransport(server),
        sleep=sleep if sleep is not None else Recorder(),
    )


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    yield request.param


# The request each backend sends.


def test_tei_request() -> None:
    server = FakeServer("tei")
    build("tei", server).embed(["a", "b"])
    (request,) = server.requests
    assert request.method == "POST"
    assert request.url == "http://tei.test/embed"
    assert request.headers["content-type"] == "application/json"
    assert json.loads(request.content) == {
        "inputs": ["a", "b"],
        "normalize": True,
        "truncate": False,
    }
    assert "authorization" not in request.headers


def test_ollama_request() -> None:
    server = FakeServer("ollama")
    build("ollama", server).embed(["a", "b"])
    (request,) = server.requests
    assert request.method == "POST"
    assert request.url == "http://ollama.test:11434/api/embed"
    assert json.loads(request.content) == {"model": MODEL, "input": ["a", "b"], "truncate": False}
    assert "authorization" not in request.headers


def test_openai_request_without_key() -> None:
    server = FakeServer("openai")
    build("openai", server).embed(["a", "b"])
    (request,) = server.requests
    assert request.method == "POST"
    assert request.url == "http://openai.test/v1/embeddings"
    assert json.loads(request.content) == {"model": MODEL, "input": ["a", "b"]}
    assert "authorization" not in request.headers


def test_openai_request_with_key() -> None:
    server = FakeServer("openai", api_key="sk-test-123")
    vectors = build("openai", server, embedding_api_key="sk-test-123").embed(["a"])
    assert server.requests[0].headers["authorization"] == "Bearer sk-test-123"
    np.testing.assert_allclose(vectors, expected(["a"]), rtol=1e-6)


def test_openai_empty_key_sends_no_header() -> None:
    server = FakeServer("openai")
    build("openai", server, embedding_api_key="").embed(["a"])
    assert "authorization" not in server.requests[0].headers


def test_openai_wrong_key_is_rejected_without_retry() -> None:
    server = FakeServer("openai", api_key="sk-right")
    sleep = Recorder()
    embedder = build("openai", server, sleep, embedding_api_key="sk-wrong")
    with pytest.raises(EmbeddingRejected, match="401") as caught:
        embedder.embed(["a"])
    assert len(server.requests) == 1
    assert sleep.delays == []
    assert "sk-wrong" not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("http://openai.test", "/v1/embeddings"),
        ("http://openai.test/", "/v1/embeddings"),
        ("http://openai.test/v1", "/v1/embeddings"),
        ("http://openai.test/v1/", "/v1/embeddings"),
        ("http://openai.test/proxy/v1", "/proxy/v1/embeddings"),
        ("http://openai.test/proxy/", "/proxy/v1/embeddings"),
    ],
)
def test_openai_url_forms(url: str, path: str) -> None:
    server = FakeServer("openai", prefix=path.removesuffix(PATHS["openai"]))
    build("openai", server, embedding_url=url).embed(["a"])
    assert server.requests[0].url.path == path


@pytest.mark.parametrize("suffix", ["", "/", "/prefix", "/prefix/"])
def test_url_forms(backend: str, suffix: str) -> None:
    prefix = suffix.rstrip("/")
    server = FakeServer(backend, prefix=prefix)
    build(backend, server, embedding_url=URLS[backend] + suffix).embed(["a"])
    assert server.requests[0].url.path == prefix + PATHS[backend]


def test_url_without_scheme_is_a_configuration_error(backend: str) -> None:
    with pytest.raises(ConfigurationError, match="ENGRAM_EMBEDDING_URL"):
        build(backend, FakeServer(backend), embedding_url="tei.test:8080")


# Batching, order, normalisation.


def test_batches_keep_order(backend: str) -> None:
    texts = [f"text number {i}" for i in range(70)]
    server = FakeServer(backend)
    vectors = build(backend, server, embedding_batch_size=32).embed(texts)
    assert [len(batch) for batch in server.batches()] == [32, 32, 6]
    assert [t for batch in server.batches() for t in batch] == texts
    assert vectors.shape == (70, DIM)
    np.testing.assert_allclose(vectors, expected(texts), rtol=1e-6)


def test_vectors_are_float32_and_unit_length(backend: str) -> None:
    vectors = build(backend, FakeServer(backend)).embed(["alpha", "beta", "gamma"])
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(vectors, expected(["alpha", "beta", "gamma"]), rtol=1e-6)


def test_embed_query(backend: str) -> None:
    server = FakeServer(backend)
    vector = build(backend, server).embed_query("where is it?")
    assert vector.shape == (DIM,)
    assert vector.dtype == np.float32
    np.testing.assert_allclose(vector, expected(["where is it?"])[0], rtol=1e-6)
    assert server.batches() == [["where is it?"]]


def test_empty_input_needs_no_request(backend: str) -> None:
    server = FakeServer(backend)
    vectors = build(backend, server, embedding_dimension=DIM).embed([])
    assert vectors.shape == (0, DIM)
    assert vectors.dtype == np.float32
    assert server.requests == []


def test_a_bare_string_is_refused(backend: str) -> None:
    with pytest.raises(TypeError):
        build(backend, FakeServer(backend)).embed("not a list")


def test_openai_orders_by_index() -> None:
    texts = ["first", "second", "third", "fourth"]
    server = FakeServer("openai", reverse=True)
    vectors = build("openai", server).embed(texts)
    assert [item["index"] for item in server.answers[0]["data"]] == [3, 2, 1, 0]
    np.testing.assert_allclose(vectors, expected(texts), rtol=1e-6)


@pytest.mark.parametrize(
    "indices",
    [[0, 0], [0, 2], [1, -1], [0, "1"], [0, True], [0, None]],
    ids=["repeated", "out-of-range", "negative", "string", "bool", "missing"],
)
def test_openai_bad_indices_are_rejected(indices: list[Any]) -> None:
    data = [{"index": i, "embedding": [1.0, 2.0]} for i in indices]
    server = FakeServer("openai", failures=[httpx.Response(200, json={"data": data})])
    with pytest.raises(EmbeddingRejected, match="index"):
        build("openai", server).embed(["a", "b"])


# Retries.


def test_retries_503_then_succeeds(backend: str) -> None:
    server = FakeServer(backend, failures=[503])
    sleep = Recorder()
    vectors = build(backend, server, sleep).embed(["a", "b"])
    assert len(server.requests) == 2
    assert server.bodies()[0] == server.bodies()[1]
    assert len(sleep.delays) == 1
    np.testing.assert_allclose(vectors, expected(["a", "b"]), rtol=1e-6)


def test_retries_connection_error_then_succeeds(backend: str) -> None:
    server = FakeServer(backend, failures=[httpx.ConnectError, httpx.ConnectError])
    sleep = Recorder()
    vectors = build(backend, server, sleep).embed(["a"])
    assert len(server.requests) == 3
    assert len(sleep.delays) == 2
    np.testing.assert_allclose(vectors, expected(["a"]), rtol=1e-6)


@pytest.mark.parametrize(
    "failure",
    [
        httpx.ReadTimeout,
        httpx.ConnectTimeout,
        httpx.RemoteProtocolError,
        httpx.DecodingError,
        500,
        502,
        504,
        429,
        408,
    ],
)
def test_transient_failures_are_retried(failure: Failure) -> None:
    server = FakeServer("tei", failures=[failure])
    build("tei", server).embed(["a"])
    assert len(server.requests) == 2


def test_gives_up_after_max_retries(backend: str) -> None:
    server = FakeServer(backend, failures=[503] * 10)
    sleep = Recorder()
    embedder = build(backend, server, sleep, embedding_max_retries=2)
    with pytest.raises(ServiceUnavailable) as caught:
        embedder.embed(["a"])
    assert len(server.requests) == 3
    assert len(sleep.delays) == 2
    error = caught.value
    assert error.service == f"embedding backend {backend}"
    assert "503" in error.detail
    assert "3 attempts" in error.detail
    assert error.hint
    assert isinstance(error.__cause__, httpx.HTTPStatusError)
    assert error.__cause__.response.status_code == 503


def test_gives_up_on_connection_errors(backend: str) -> None:
    server = FakeServer(backend, failures=[httpx.ConnectError] * 10)
    embedder = build(backend, server, embedding_max_retries=3)
    with pytest.raises(ServiceUnavailable, match="ConnectError") as caught:
        embedder.embed(["a"])
    assert len(server.requests) == 4
    assert isinstance(caught.value.__cause__, httpx.ConnectError)


def test_zero_retries_means_one_attempt() -> None:
    server = FakeServer("tei", failures=[503])
    sleep = Recorder()
    with pytest.raises(ServiceUnavailable):
        build("tei", server, sleep, embedding_max_retries=0).embed(["a"])
    assert len(server.requests) == 1
    assert sleep.delays == []


def test_backoff_is_exponential_with_jitter_and_capped() -> None:
    server = FakeServer("tei", failures=[503] * 7)
    sleep = Recorder()
    with pytest.raises(ServiceUnavailable):
        build("tei", server, sleep, embedding_max_retries=6).embed(["a"])
    ceilings = [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert len(sleep.delays) == len(ceilings)
    for delay, ceiling in zip(sleep.delays, ceilings, strict=True):
        assert ceiling / 2 <= delay <= ceiling


@pytest.mark.parametrize(("retry_after", "delay"), [("2", 2.0), ("0.25", 0.25), ("3600", 30.0), ("-5", 0.0)])
def test_retry_after_seconds_is_honoured_and_capped(retry_after: str, delay: float) -> None:
    busy = httpx.Response(429, headers={"Retry-After": retry_after}, json={"error": "Model is overloaded"})
    server = FakeServer("tei", failures=[busy])
    sleep = Recorder()
    build("tei", server, sleep).embed(["a"])
    assert sleep.delays == [delay]


def test_retry_after_http_date() -> None:
    when = datetime.now(UTC) + timedelta(seconds=20)
    busy = httpx.Response(503, headers={"Retry-After": format_datetime(when, usegmt=True)})
    sleep = Recorder()
    build("tei", FakeServer("tei", failures=[busy]), sleep).embed(["a"])
    (delay,) = sleep.delays
    assert 15.0 <= delay <= 20.0


def test_unreadable_retry_after_falls_back_to_backoff() -> None:
    busy = httpx.Response(503, headers={"Retry-After": "soon"})
    sleep = Recorder()
    build("tei", FakeServer("tei", failures=[busy]), sleep).embed(["a"])
    (delay,) = sleep.delays
    assert 0.25 <= delay <= 0.5


# Refusals and malformed answers: never retried.


@pytest.mark.parametrize("status", [400, 404, 413, 422])
def test_client_errors_are_rejected_without_retry(backend: str, status: int) -> None:
    refusal = httpx.Response(status, json={"error": "Input validation error", "error_type": "validation"})
    server = FakeServer(backend, failures=[refusal])
    sleep = Recorder()
    with pytest.raises(EmbeddingRejected) as caught:
        build(backend, server, sleep).embed(["a"])
    assert len(server.requests) == 1
    assert sleep.delays == []
    message = str(caught.value)
    assert str(status) in message
    assert "Input validation error" in message
    assert backend in message


def test_body_excerpt_is_short() -> None:
    refusal = httpx.Response(400, text="x" * 10_000)
    with pytest.raises(EmbeddingRejected) as caught:
        build("tei", FakeServer("tei", failures=[refusal])).embed(["a"])
    assert len(str(caught.value)) < 400


def test_wrong_path_is_rejected() -> None:
    server = FakeServer("ollama", prefix="/elsewhere")
    with pytest.raises(EmbeddingRejected, match="404"):
        build("ollama", server).embed(["a"])


def test_wrong_vector_count_is_rejected(backend: str) -> None:
    short = httpx.Response(200, json=answer(backend, [vector_for("a")]))
    server = FakeServer(backend, failures=[short])
    with pytest.raises(EmbeddingRejected, match="1 vectors for 2 texts"):
        build(backend, server).embed(["a", "b"])
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "vectors",
    [
        [[1.0, 2.0], [1.0]],
        [[1.0, 2.0], ["x", "y"]],
        [[1.0, 2.0], [None, None]],
        [[True, False], [True, True]],
        [[], []],
        [1.0, 2.0],
        [[[1.0]], [[2.0]]],
    ],
    ids=["ragged", "strings", "nulls", "booleans", "empty", "flat", "nested"],
)
def test_malformed_vectors_are_rejected(backend: str, vectors: list[Any]) -> None:
    server = FakeServer(backend, failures=[httpx.Response(200, json=answer(backend, vectors))])
    with pytest.raises(EmbeddingRejected):
        build(backend, server).embed(["a", "b"])


def test_non_finite_numbers_are_rejected() -> None:
    nan = httpx.Response(200, content=b"[[NaN, 1.0], [1.0, 1.0]]")
    with pytest.raises(EmbeddingRejected, match="NaN"):
        build("tei", FakeServer("tei", failures=[nan])).embed(["a", "b"])


@pytest.mark.parametrize(
    "body",
    [b"<html>Bad gateway</html>", b'{"error": "no"}', b'{"embeddings": null}', b'{"data": "x"}'],
)
def test_unexpected_answers_are_rejected(backend: str, body: bytes) -> None:
    server = FakeServer(backend, failures=[httpx.Response(200, content=body)])
    with pytest.raises(EmbeddingRejected, match="HTTP 200"):
        build(backend, server).embed(["a"])


# Dimension.


def test_dimension_from_settings_needs_no_request(backend: str) -> None:
    server = FakeServer(backend)
    assert build(backend, server, embedding_dimension=DIM).dimension == DIM
    assert server.requests == []


def test_dimension_is_probed_once(backend: str) -> None:
    server = FakeServer(backend, dim=9)
    embedder = build(backend, server)
    assert embedder.dimension == 9
    assert embedder.dimension == 9
    assert len(server.requests) == 1
    assert len(server.batches()[0]) == 1


def test_dimension_is_known_after_embedding(backend: str) -> None:
    server = FakeServer(backend)
    embedder = build(backend, server)
    embedder.embed(["a", "b"])
    assert embedder.dimension == DIM
    assert len(server.requests) == 1


def test_dimension_other_than_configured_is_rejected(backend: str) -> None:
    server = FakeServer(backend, dim=DIM)
    with pytest.raises(EmbeddingRejected, match="ENGRAM_EMBEDDING_DIMENSION"):
        build(backend, server, embedding_dimension=DIM + 1).embed(["a"])


def test_dimension_must_stay_the_same(backend: str) -> None:
    server = FakeServer(backend, dim=DIM)
    embedder = build(backend, server)
    embedder.embed(["a"])
    server.dim = DIM + 2
    with pytest.raises(EmbeddingRejected, match="earlier answers"):
        embedder.embed(["b"])


# Wiring.


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_make_embedder_picks_the_backend(backend_name: str) -> None:
    server = FakeServer(backend_name)
    embedder = make_embedder(settings_for(backend_name), transport=httpx.MockTransport(server))
    assert isinstance(embedder, CLASSES[backend_name])
    assert isinstance(embedder, Embedder)
    assert embedder.model_name == MODEL
    np.testing.assert_allclose(embedder.embed(["a"]), expected(["a"]), rtol=1e-6)
    assert server.requests[0].url == URLS[backend_name] + PATHS[backend_name]


def test_an_injected_client_is_used_and_left_open() -> None:
    server = FakeServer("tei", prefix="/custom")
    client = httpx.Client(base_url="http://tei.test/custom", transport=httpx.MockTransport(server))
    embedder = TeiEmbedder(settings_for("tei"), client=client, sleep=Recorder())
    embedder.embed(["a"])
    embedder.close()
    assert not client.is_closed
    assert server.requests[0].url == "http://tei.test/custom/embed"
    client.close()


def test_transport_and_client_together_are_refused() -> None:
    with httpx.Client() as client, pytest.raises(ValueError):
        TeiEmbedder(settings_for("tei"), client=client, transport=httpx.MockTransport(FakeServer("tei")))


def test_context_manager_closes_its_client() -> None:
    with build("tei", FakeServer("tei")) as embedder:
        embedder.embed(["a"])
    assert embedder._client.is_closed


def test_logs_hold_neither_texts_nor_key(caplog: pytest.LogCaptureFixture) -> None:
    secret_text = "my private diary entry"
    key = "sk-very-secret"
    server = FakeServer("openai", failures=[503, httpx.ConnectError, 503, 503], api_key=key)
    embedder = build("openai", server, embedding_api_key=key, embedding_max_retries=3)
    with caplog.at_level(logging.DEBUG), pytest.raises(ServiceUnavailable) as caught:
        embedder.embed([secret_text])
    assert caplog.records, "retries are logged"
    for text in [caplog.text, str(caught.value)]:
        assert secret_text not in text
        assert key not in text
