"""The HTTP app: where it listens, API keys and their failures, tenants, the limits that keep one
client or tenant from taking it all, and the status page's session."""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator

from shared.errors import ConfigurationError
from shared.settings.stores import empty_secret_is_unset


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class HttpSettings(BaseModel):
    api_host: str = Field("127.0.0.1", description="HTTP app address.")
    api_port: int = Field(8000, ge=1, le=65535, description="HTTP app port.")
    auth_mode: Literal["keys", "local"] = Field(
        "keys",
        description="keys: every /api call needs an API key (engram keys); local: none, loopback only.",
    )
    allowed_hosts: list[str] = Field(
        default_factory=lambda: ["127.0.0.1", "localhost", "[::1]"],
        description='Host headers the app answers, as JSON: ["engram.example.com"]; "*" any.',
    )
    auth_cache_s: float = Field(
        5.0, ge=0, description="How long a key is trusted before it is looked up again."
    )
    auth_stale_s: float = Field(
        3600.0, ge=0, description="How long a key seen before still works while Neo4j is unreachable."
    )
    auth_failures_per_address: int = Field(
        100, ge=1, description="Failed keys or sign-ins from one address within the window before 429."
    )
    auth_failures_per_key: int = Field(
        20, ge=1, description="Failed keys or sign-ins naming one key id within the window before 429."
    )
    auth_failures_window_s: int = Field(
        60, ge=1, description="The window failed key checks are counted in (and a 429 lasts at most)."
    )
    webhook_tolerance_s: float = Field(
        300.0, gt=0, description="How far a signed webhook's timestamp may be from now."
    )

    strict_tenants: bool = Field(
        False, description="engram keys create refuses a tenant confusable with an existing one (else warns)."
    )
    allow_lookalike_tenants: bool = Field(
        False,
        description="Take tenants that read as another ASCII name (a Cyrillic a, a fullwidth a); else 422.",
    )

    # Input limits of a request.
    max_batch_documents: int = Field(1000, ge=1, description="Most documents in one HTTP request.")
    max_request_bytes: int = Field(64_000_000, ge=1, description="Largest HTTP body accepted.")

    api_workers: int = Field(
        1, ge=1, le=64, description="HTTP app processes (uvicorn workers); each holds its own searches."
    )
    api_max_pending_searches: int = Field(
        500,
        ge=1,
        description="Searches one app process holds waiting at once; more get 503 with Retry-After.",
    )
    tenant_max_searches: int = Field(
        64,
        ge=1,
        description="Searches of one tenant queued or running at once, all app processes; more get 429.",
    )
    tenant_max_ingests: int = Field(
        16, ge=1, description="Ingest requests of one tenant in flight at once, all app processes; more: 429."
    )
    api_max_connections: int = Field(
        1000, ge=1, description="Connections one app process holds; past it the oldest idle one is closed."
    )
    api_max_connections_per_client: int = Field(
        100,
        ge=1,
        description="Connections one client address holds at once; more get 503 (behind a proxy: raise it).",
    )
    api_anonymous_body_bytes: int = Field(
        8192, ge=0, description="Largest body of a request no key vouches for (/ui/signin, the status page)."
    )
    api_unverified_reads: int = Field(
        8, ge=1, description="Bodies read at once before a key vouches for them (signed webhooks); more: 503."
    )
    api_docs: bool = Field(
        False, description="Serves /docs and /redoc (their pages load scripts from a CDN)."
    )
    api_keep_alive_s: int = Field(5, ge=1, description="An idle kept-alive connection is closed after this.")
    api_header_timeout_s: float = Field(
        10.0, gt=0, description="A request's headers must arrive within this of its first byte, else closed."
    )
    api_body_timeout_s: float = Field(
        30.0, gt=0, description="A request's body must be complete this long after its headers, else 408."
    )

    # The status page (/ui).
    ui_cache_s: float = Field(
        5.0, ge=0, description="How long the status page reuses a tenant's counts and entities it read."
    )
    ui_session_key: SecretStr | None = Field(
        None,
        description="Signs the /ui sign-in cookie; unset: data_dir/secrets/ui-session.key, made once.",
    )
    ui_session_s: int = Field(
        8 * 3600, ge=60, le=7 * 24 * 3600, description="How long a sign-in to the status page (/ui) lasts."
    )

    @field_validator("ui_session_key", mode="before")
    @classmethod
    def _empty_session_key_is_unset(cls, value: object) -> object:
        return empty_secret_is_unset(value)

    @model_validator(mode="after")
    def _local_mode_on_loopback_only(self) -> HttpSettings:
        if self.auth_mode == "local" and not is_loopback(self.api_host):
            raise ConfigurationError(
                f"ENGRAM_AUTH_MODE=local serves without API keys, so only on loopback: "
                f"ENGRAM_API_HOST={self.api_host} is not"
            )
        return self
