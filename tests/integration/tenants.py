"""Clients acting as one tenant, and the count of cross-tenant probes and leaks.

``acting_as(keys, tenant)`` is the one place that says how a request speaks for a tenant: with a
key of that tenant's own, which decides the tenant (no ``user_id`` needed; naming another is 403).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any, Protocol

from fastapi.testclient import TestClient

from tests.integration.support import APP_URL, KeyMaker


class Answer(Protocol):
    """What the probes read of a response (the test client's is httpx's, or httpx2's)."""

    status_code: int

    @property
    def text(self) -> str: ...

    def json(self, **kwargs: Any) -> Any: ...


def client_with(key: str | None = None, **headers: str) -> TestClient:
    """A client of the running app, with ``key`` or none (not entered: the session's ``api`` owns
    the app's lifespan)."""
    from producers.http.app import app

    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return TestClient(app, base_url=APP_URL, headers=headers)


@dataclass
class Acting:
    """Requests as ``tenant``, with its key; ``user_id`` is named only when a request says so."""

    client: TestClient
    tenant: str
    key_id: str | None = None

    def request(
        self,
        method: str,
        url: str,
        params: dict[str, Any] | list[tuple[str, Any]] | None = None,
        json: Any = None,
        content: bytes | None = None,
    ) -> Answer:
        headers = {"content-type": "application/json"} if content is not None else None
        return self.client.request(method, url, params=params, json=json, content=content, headers=headers)

    def get(self, url: str, **kwargs: Any) -> Answer:
        return self.request("GET", url, **kwargs)

    def delete(self, url: str, **kwargs: Any) -> Answer:
        return self.request("DELETE", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> Answer:
        return self.request("POST", url, **kwargs)

    def put(self, url: str, **kwargs: Any) -> Answer:
        return self.request("PUT", url, **kwargs)


def acting_as(keys: KeyMaker, tenant: str) -> Acting:
    made = keys(tenant)
    return Acting(client_with(made.key), tenant, made.info.id)


@dataclass
class Probes:
    """Each request one tenant sends at another's data, and each that leaked something of it."""

    count: int = 0
    leaks: list[str] = field(default_factory=list)
    by_kind: collections.Counter[str] = field(default_factory=collections.Counter)

    def record(self, kind: str, what: str, leaked: bool) -> None:
        self.count += 1
        self.by_kind[kind] += 1
        if leaked:
            self.leaks.append(f"{kind}: {what}")

    def merge(self, other: Probes) -> None:
        self.count += other.count
        self.leaks += other.leaks
        self.by_kind.update(other.by_kind)

    def lines(self) -> list[str]:
        kinds = ", ".join(f"{kind}: {count}" for kind, count in sorted(self.by_kind.items()))
        return [f"probes: {self.count}", f"leaks: {len(self.leaks)}", f"by kind: {kinds}", *self.leaks]


PROBES = Probes()
