"""One JSON call to a model server over httpx, errors translated: what the reranker and the chat
backends share. One attempt only: they run inside a search's deadline, and a search whose optional
step fails goes on without it (saying so) rather than waiting for a retry."""

from __future__ import annotations

from typing import Any

import httpx

from shared.errors import ConfigurationError, ModelAnswerRejected, ServiceUnavailable

_EXCERPT_CHARS = 200


def client(
    service: str, url: str | None, timeout_s: float, transport: httpx.BaseTransport | None
) -> httpx.Client:
    """A client for ``url``; ``service`` names the setting in errors (``ENGRAM_RERANK_URL``)."""
    try:
        parsed = httpx.URL(url or "")
    except httpx.InvalidURL as exc:
        raise ConfigurationError(f"{service} is not a valid URL: {exc}") from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ConfigurationError(f"{service} must be an http(s):// URL, got {url!r}")
    return httpx.Client(base_url=str(parsed), timeout=httpx.Timeout(timeout_s), transport=transport)


def post_json(http: httpx.Client, service: str, path: str, body: Any, headers: dict[str, str]) -> Any:
    """The decoded answer; ``ServiceUnavailable`` for a server down, slow, overloaded or failing
    (5xx, 408, 429), ``ModelAnswerRejected`` for a refusal (other 4xx) or an answer that is not JSON."""
    try:
        response = http.post(path, json=body, headers=headers)
    except httpx.TimeoutException as exc:
        raise ServiceUnavailable(service, f"no answer within {http.timeout.read}s") from exc
    except httpx.TransportError as exc:
        raise ServiceUnavailable(service, f"{type(exc).__name__}: {exc}") from exc
    status = response.status_code
    if status >= 500 or status in (408, 429):
        raise ServiceUnavailable(service, f"HTTP {status}: {_excerpt(response)}")
    if status >= 400:
        raise ModelAnswerRejected(f"{service} refused the request: HTTP {status}: {_excerpt(response)}")
    try:
        return response.json()
    except ValueError as exc:
        raise ModelAnswerRejected(
            f"{service} answered with something not JSON: {_excerpt(response)}"
        ) from exc


def _excerpt(response: httpx.Response) -> str:
    text = " ".join(response.text.split())
    return repr(text[:_EXCERPT_CHARS] + ("..." if len(text) > _EXCERPT_CHARS else ""))
