"""Clients acting as one tenant, and the count of cross-tenant probes and leaks.

``acting_as(api, tenant)`` is the one place that says how a request speaks for a tenant: today it
names the tenant in ``user_id``; with API keys, the key decides.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any, Protocol

from fastapi.testclient import TestClient


class Answer(Protocol):
    """What the probes read of a response (the test client's is httpx's, or httpx2's)."""

    status_code: int

    @property
    def text(self) -> str: ...

    def json(self, **kwargs: Any) -> Any: ...


@dataclass
class Acting:
    """Requests as ``tenant``: ``user_id`` filled into the query or body unless given."""

    api: TestClient
    tenant: str

    def request(
        self,
        method: str,
        url: str,
        params: dict[str, Any] | list[tuple[str, Any]] | None = None,
        json: Any = None,
        content: bytes | None = None,
        name_tenant: bool = True,
    ) -> Answer:
        if name_tenant and isinstance(params, dict | None) and method in ("GET", "DELETE"):
            params = {"user_id": self.tenant, **(params or {})}
        if name_tenant and isinstance(json, dict) and "documents" in json:
            json = {"documents": [{"user_id": self.tenant, **document} for document in json["documents"]]}
        elif name_tenant and isinstance(json, dict):
            json = {"user_id": self.tenant, **json}
        headers = {"content-type": "application/json"} if content is not None else None
        return self.api.request(method, url, params=params, json=json, content=content, headers=headers)

    def get(self, url: str, **kwargs: Any) -> Answer:
        return self.request("GET", url, **kwargs)

    def delete(self, url: str, **kwargs: Any) -> Answer:
        return self.request("DELETE", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> Answer:
        return self.request("POST", url, **kwargs)

    def put(self, url: str, **kwargs: Any) -> Answer:
        return self.request("PUT", url, **kwargs)


def acting_as(api: TestClient, tenant: str) -> Acting:
    return Acting(api, tenant)


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
