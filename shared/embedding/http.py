"""What every HTTP embedding backend shares: batching, retries, answer checks, normalisation.

An adapter names its endpoint, builds the JSON body of one batch and pulls the vectors out of the
answer; everything else, including which failures are worth retrying, lives here once.
"""

from __future__ import annotations

import email.utils
import logging
import math
import random
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar, Self

import httpx
import numpy as np

from shared.embedding.base import Vectors, normalise
from shared.errors import ConfigurationError, EmbeddingRejected, ServiceUnavailable
from shared.settings import Settings

logger = logging.getLogger(__name__)

_EXCERPT_CHARS = 200
_PROBE_TEXT = "dimension probe"


class MalformedAnswer(ValueError):
    """Raised by an adapter's :meth:`HttpEmbedder._vectors`; the base turns it into
    :class:`EmbeddingRejected` with the status and an excerpt of the answer."""


class HttpEmbedder(ABC):
    """Base of the embedders that call an embedding server over HTTP.

    Subclasses set :attr:`backend`, :attr:`path` and :attr:`hint` and fill in :meth:`_payload`
    and :meth:`_vectors`; :meth:`_path` and :meth:`_headers` may be overridden.

    Pass ``transport`` (in tests an ``httpx.MockTransport``) or a ready ``client`` whose
    ``base_url`` is the server; else a client is built from the settings. ``sleep`` waits between
    attempts and is injectable so tests need not wait.
    """

    backend: ClassVar[str]
    path: ClassVar[str]
    hint: ClassVar[str] = "check ENGRAM_EMBEDDING_URL and that the server is running"

    retry_statuses: ClassVar[frozenset[int]] = frozenset({408, 429})
    backoff_base_s: ClassVar[float] = 0.5
    backoff_max_s: ClassVar[float] = 8.0
    retry_after_max_s: ClassVar[float] = 30.0

    def __init__(
        self,
        settings: Settings,
        *,
        transport: httpx.BaseTransport | None = None,
        client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if transport is not None and client is not None:
            raise ValueError("pass either transport or client, not both")
        self._settings = settings
        self._sleep = sleep
        self._dimension: int | None = settings.embedding_dimension
        self._owns_client = client is None
        if client is None:
            client = httpx.Client(
                base_url=_checked_url(settings.embedding_url),
                timeout=httpx.Timeout(settings.embedding_timeout_s),
                transport=transport,
            )
        self._client = client

    # Hooks for the adapters.

    @abstractmethod
    def _payload(self, texts: list[str]) -> dict[str, Any]:
        """The JSON body that embeds one batch."""

    @abstractmethod
    def _vectors(self, body: Any, count: int) -> list[Any]:
        """The vectors, in input order, out of a decoded answer to a batch of ``count`` texts.

        Raise :class:`MalformedAnswer` when the answer lacks the expected structure; the base
        checks the count, the numbers and the dimension of what is returned.
        """

    def _path(self) -> str:
        """The endpoint, relative to the client's ``base_url``."""
        return self.path

    def _headers(self) -> dict[str, str]:
        return {}

    # The Embedder interface.

    @property
    def model_name(self) -> str:
        return self._settings.embedding_model

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            return int(self.embed([_PROBE_TEXT]).shape[1])
        return self._dimension

    def embed(self, texts: Sequence[str]) -> Vectors:
        if isinstance(texts, str):
            # A str is a Sequence[str] too, and would be embedded one character at a time.
            raise TypeError("embed() takes a sequence of texts, not a str; see embed_query()")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        size = self._settings.embedding_batch_size
        batches = [self._embed_batch(texts[i : i + size]) for i in range(0, len(texts), size)]
        return normalise(np.concatenate(batches))

    def embed_query(self, text: str) -> Vectors:
        vector: Vectors = self.embed([text])[0]
        return vector

    def close(self) -> None:
        """Close the HTTP client, unless it was passed in."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # The shared machinery.

    @property
    def _service(self) -> str:
        return f"embedding backend {self.backend}"

    def _embed_batch(self, texts: list[str]) -> Vectors:
        response = self._post(self._payload(texts))
        try:
            body = response.json()
        except ValueError as exc:
            raise self._rejected(response, "the answer is not JSON") from exc
        try:
            rows = self._vectors(body, len(texts))
        except MalformedAnswer as exc:
            raise self._rejected(response, str(exc)) from exc
        if len(rows) != len(texts):
            raise self._rejected(response, f"{len(rows)} vectors for {len(texts)} texts")
        try:
            raw = np.asarray(rows)
        except ValueError as exc:  # ragged rows
            raise self._rejected(response, "the vectors differ in length") from exc
        # Without an explicit dtype numpy keeps strings, booleans and nulls visible for this check.
        if raw.ndim != 2 or raw.shape[1] == 0 or raw.dtype.kind not in "iuf":
            raise self._rejected(response, "expected one non-empty list of numbers per text")
        with np.errstate(over="ignore"):
            vectors = raw.astype(np.float32)
        if not np.isfinite(vectors).all():
            raise self._rejected(response, "the vectors hold NaN or infinity")
        self._check_dimension(vectors.shape[1], response)
        return vectors

    def _check_dimension(self, got: int, response: httpx.Response) -> None:
        if self._dimension is None:
            self._dimension = got
        elif got != self._dimension:
            source = (
                "ENGRAM_EMBEDDING_DIMENSION"
                if self._settings.embedding_dimension is not None
                else "earlier answers"
            )
            raise self._rejected(
                response, f"vectors of dimension {got}, expected {self._dimension} ({source})"
            )

    def _post(self, payload: dict[str, Any]) -> httpx.Response:
        """POST one batch, retrying what may pass later; returns the 2xx answer."""
        attempts = self._settings.embedding_max_retries + 1
        failure: Exception | None = None
        reason = ""
        for attempt in range(attempts):
            retry_after: float | None = None
            try:
                response = self._client.post(self._path(), json=payload, headers=self._headers())
            except httpx.RequestError as exc:  # not just TransportError: no raw httpx error escapes
                failure, reason = exc, f"{type(exc).__name__}: {exc}"
            else:
                if response.is_success:
                    return response
                if not self._is_retryable(response.status_code):
                    raise self._rejected(response, "the request was refused")
                failure = httpx.HTTPStatusError(
                    f"HTTP {response.status_code}", request=response.request, response=response
                )
                reason = f"HTTP {response.status_code}: {_excerpt(response)}"
                retry_after = _retry_after(response)
            if attempt + 1 < attempts:
                delay = self._delay(attempt, retry_after)
                logger.warning(
                    "%s failed (%s); retrying in %.2fs (attempt %d of %d)",
                    self._service,
                    reason,
                    delay,
                    attempt + 1,
                    attempts,
                )
                self._sleep(delay)
        raise ServiceUnavailable(
            self._service, f"{reason} (after {attempts} attempts)", self.hint
        ) from failure

    def _is_retryable(self, status: int) -> bool:
        return status >= 500 or status in self.retry_statuses

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.retry_after_max_s)
        ceiling = min(self.backoff_max_s, self.backoff_base_s * 2.0**attempt)
        # Half fixed, half random: workers that failed together do not all come back together.
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    def _rejected(self, response: httpx.Response, problem: str) -> EmbeddingRejected:
        return EmbeddingRejected(
            f"{self._service} answered HTTP {response.status_code}: {problem}: {_excerpt(response)}"
        )


def _checked_url(url: str | None) -> str:
    try:
        parsed = httpx.URL(url or "")
    except httpx.InvalidURL as exc:
        raise ConfigurationError(f"ENGRAM_EMBEDDING_URL is not a valid URL: {exc}") from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ConfigurationError(f"ENGRAM_EMBEDDING_URL must be an http(s):// URL, got {url!r}")
    return str(parsed)


def _excerpt(response: httpx.Response) -> str:
    text = " ".join(response.text.split())
    if len(text) > _EXCERPT_CHARS:
        text = text[:_EXCERPT_CHARS] + "..."
    return repr(text)


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds asked for by ``Retry-After`` (a number or an HTTP date), if given and readable."""
    value = response.headers.get("Retry-After", "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


__all__ = ["HttpEmbedder", "MalformedAnswer"]
