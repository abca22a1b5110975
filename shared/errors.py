"""The one exception tree of Engram.

Dependency errors are translated at the adapter boundary (``raise ... from exc``) into these, so
workers and producers decide retry-or-not by type alone: a ``TransientError`` is worth retrying
with backoff, a ``PermanentError`` never is.
"""

from __future__ import annotations


class EngramError(Exception):
    """Base of every error Engram raises on purpose."""


class TransientError(EngramError):
    """May succeed if tried again later (a service down, a timeout, a 5xx or 429)."""


class PermanentError(EngramError):
    """Will fail the same way every time; retrying only wastes work."""


class ConfigurationError(PermanentError):
    """Settings that cannot work (a placeholder secret in production, a chunk larger than the model)."""


class InvalidInput(PermanentError):
    """Bad input from a caller: the message names the field and the problem."""


class Unauthenticated(PermanentError):
    """No API key, an unknown or revoked one, or a webhook signature that does not hold (401)."""


class TooManyFailures(Unauthenticated):
    """Too many failed sign-ins or keys from this address, or for this key id, just now (a 429)."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"too many failed attempts with API keys; retry in {retry_after_s} s")
        self.retry_after_s = retry_after_s


class Forbidden(PermanentError):
    """A valid key naming a tenant it does not act for (403)."""


class RestoreRunning(PermanentError):
    """A restore is running (shared/services/restore_lock.py): another is refused (409)."""


class DocumentTooLarge(InvalidInput):
    """A document over ``ENGRAM_MAX_DOCUMENT_BYTES``, or a request over ``ENGRAM_MAX_REQUEST_BYTES``."""


class DuplicateDocument(InvalidInput):
    """One request holding the same document twice: two versions of it at once (409)."""


class ServiceUnavailable(TransientError):
    """A service Engram depends on cannot be reached.

    ``service`` names it and ``hint`` says how to start it, so a start-up failure is one clear line.
    """

    def __init__(self, service: str, detail: str, hint: str = "") -> None:
        # args hold the parts, not the message, so Celery can rebuild it on the caller's side.
        super().__init__(service, detail, hint)
        self.service = service
        self.detail = detail
        self.hint = hint

    def __str__(self) -> str:
        message = f"{self.service} is unavailable: {self.detail}"
        return f"{message} ({self.hint})" if self.hint else message


class ModelMigration(ServiceUnavailable):
    """The store is moving to another embedding model, or has moved: this process's model is not
    the one to use now. Retried (a worker waits for the switch, or for its restart with the new
    model); a search answers 503 rather than compare vectors of two models.

    Made as ``ModelMigration("model migration", detail)``, like its base, so Celery can rebuild it.
    """

    def __str__(self) -> str:
        return f"model migration: {self.detail}"


class Overloaded(ServiceUnavailable):
    """This process holds as much waiting work as it may (``ENGRAM_API_MAX_PENDING_SEARCHES``
    searches): refused at once, to be tried again shortly, rather than queued without bound.

    Made as ``Overloaded("api", detail)``: the HTTP app answers 503 with a ``Retry-After``.
    """


class TenantBusy(TransientError):
    """One tenant holds as much work in flight as a tenant may (``ENGRAM_TENANT_MAX_SEARCHES``
    searches, ``ENGRAM_TENANT_MAX_INGESTS`` ingest requests): refused at once so that the other
    tenants keep their share; the HTTP app answers 429 with ``Retry-After``."""


class EmbeddingRejected(PermanentError):
    """The embedding backend refused the input (a 4xx other than 429, a malformed answer)."""


class VectorStoreRejected(PermanentError):
    """Qdrant refused a request (a 4xx other than 408 or 429, a point it cannot take)."""


class GraphStoreRejected(PermanentError):
    """Neo4j refused a statement for what it holds (a value it cannot store, a constraint)."""


class StagingMissing(PermanentError):
    """A batch's staged chunks or vectors are gone from Redis and the stores do not hold them."""


class SearchTimeout(TransientError):
    """No query worker answered a search within the caller's timeout."""


__all__ = [
    "ConfigurationError",
    "DocumentTooLarge",
    "DuplicateDocument",
    "EmbeddingRejected",
    "EngramError",
    "Forbidden",
    "GraphStoreRejected",
    "InvalidInput",
    "ModelMigration",
    "Overloaded",
    "PermanentError",
    "RestoreRunning",
    "SearchTimeout",
    "ServiceUnavailable",
    "StagingMissing",
    "TooManyFailures",
    "TransientError",
    "Unauthenticated",
    "VectorStoreRejected",
]
