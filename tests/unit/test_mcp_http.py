"""The door of ``engram mcp --http`` (``KeyGuard``), over an in-process ASGI transport with a fake
key check: who may reach the MCP server and as which tenant. (The whole of it, keys in Neo4j and
the mcp SDK's client: tests/integration/test_mcp_http.py.)"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from producers.http.auth import CALLER
from producers.mcp.http import KeyGuard
from shared.auth import Caller
from shared.errors import ServiceUnavailable, Unauthenticated
from shared.settings import Settings

ENGRAM = str(Path(sys.executable).with_name("engram"))
KEYS = {"egk_alice": Caller(key_id="k1", tenant="alice"), "egk_admin": Caller(key_id="k2")}


class FakeKeys:
    def __init__(self, down: bool = False) -> None:
        self.down = down

    def bearer(self, token: str) -> Caller:
        if self.down:
            raise ServiceUnavailable("neo4j", "connection refused")
        if token not in KEYS:
            raise Unauthenticated("unknown API key")
        return KEYS[token]


async def tenant_app(scope: Scope, receive: Receive, send: Send) -> None:
    caller: Caller = scope[CALLER]
    body = (caller.tenant or "-").encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})


def ask(
    headers: dict[str, str] | list[tuple[str, str]],
    keys: FakeKeys | None = None,
    client: tuple[str, int] = ("127.0.0.1", 5000),
    local_tenant: str | None = None,
    **settings: Any,
) -> httpx.Response:
    guard = KeyGuard(tenant_app, Settings(**settings), keys or FakeKeys(), local_tenant)  # type: ignore[arg-type]

    async def run() -> httpx.Response:
        transport = httpx.ASGITransport(app=guard, client=client)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as http:
            return await http.post("/mcp", headers=headers, content=b"{}")

    return asyncio.run(run())


def test_a_tenant_key_in_either_header_names_the_tenant() -> None:
    assert ask({"Authorization": "Bearer egk_alice"}).text == "alice"
    assert ask({"X-API-Key": "egk_alice"}).text == "alice"


@pytest.mark.parametrize(
    ("headers", "status", "says"),
    [
        ({}, 401, "API key is required"),
        ({"X-API-Key": "egk_wrong"}, 401, "unknown API key"),
        ({"X-API-Key": "egk_admin"}, 403, "tenant key"),
        ({"X-API-Key": "egk_alice", "Authorization": "Bearer egk_alice"}, 400, "send the key once"),
        ([("X-API-Key", "egk_alice"), ("X-API-Key", "egk_wrong")], 400, "appears twice"),
        ({"X-API-Key": "egk_alice", "Host": "evil.example"}, 400, "Host"),
    ],
    ids=["no-key", "wrong-key", "admin-key", "two-ways", "twice", "foreign-host"],
)
def test_a_request_that_names_no_one_tenant_is_refused(
    headers: dict[str, str] | list[tuple[str, str]], status: int, says: str
) -> None:
    answer = ask(headers)

    assert answer.status_code == status
    assert says in answer.json()["detail"]
    if status == 401:
        assert answer.headers["www-authenticate"] == 'Bearer realm="engram"'


def test_keys_that_cannot_be_checked_are_a_503_naming_the_service() -> None:
    answer = ask({"X-API-Key": "egk_alice"}, FakeKeys(down=True))

    assert answer.status_code == 503 and answer.json()["service"] == "neo4j"


def test_the_local_mode_serves_loopback_clients_as_the_tenant_named() -> None:
    assert ask({}, local_tenant="alice", auth_mode="local").text == "alice"
    refused = ask({}, client=("10.1.2.3", 5000), local_tenant="alice", auth_mode="local")
    assert refused.status_code == 403


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["mcp"], {}, "needs --user"),
        (["mcp", "--http", "--user", "alice"], {}, "drop --user"),
        (["mcp", "--http"], {"ENGRAM_AUTH_MODE": "local"}, "give --user"),
        (
            ["mcp", "--http", "--user", "a", "--host", "0.0.0.0"],
            {"ENGRAM_AUTH_MODE": "local"},
            "not on 0.0.0.0",
        ),
    ],
)
def test_engram_mcp_refuses_arguments_that_leave_the_tenant_unclear(
    args: list[str], env: dict[str, str], says: str
) -> None:
    done = subprocess.run(
        [ENGRAM, *args], capture_output=True, text=True, timeout=60, env={**os.environ, **env}, check=False
    )

    assert done.returncode == 2 and says in done.stderr
