"""``engram mcp --http`` as a remote agent reaches it: the ``mcp`` SDK's own streamable HTTP client,
against the real queues and stores. The API key decides the tenant of every call."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from shared.settings import Settings
from tests.integration.served import engram_serving, exchange
from tests.integration.support import KeyMaker, Workers

pytestmark = pytest.mark.integration

SLOW_S = 2.0
ACCEPT = "application/json, text/event-stream"
HIKE = "Maya said her sister hiked up Mount Tam last Saturday."


@pytest.fixture(scope="module")
def mcp_url(settings: Settings, workers: Workers) -> Iterator[str]:
    port = settings.api_port
    log = settings.data_dir / "logs" / "test-mcp-http.log"
    args = ["mcp", "--http", "--host", "127.0.0.1", "--port", str(port)]
    limits = {"ENGRAM_API_HEADER_TIMEOUT_S": str(SLOW_S), "ENGRAM_API_BODY_TIMEOUT_S": str(SLOW_S)}
    with engram_serving(args, port, log, "/mcp", **limits) as base:
        yield f"{base}/mcp"


def _agent(headers: dict[str, str]) -> httpx.AsyncClient:
    return httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30, read=120))


class Agent:
    """One MCP session over HTTP with one key."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        return await self.session.call_tool(tool, arguments)

    async def wait_done(self, document_id: str) -> str:
        deadline = time.monotonic() + 120
        state = "unknown"
        while time.monotonic() < deadline:
            status = await self.call("memory_status", {"document_id": document_id})
            assert status.structuredContent is not None, status.content
            state = status.structuredContent["state"]
            if state in ("done", "failed"):
                break
            await asyncio.sleep(0.5)
        return state


async def _two_tenants(url: str, alice_key: str, bob_key: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with (
        _agent({"Authorization": f"Bearer {alice_key}"}) as alice_http,
        streamable_http_client(url, http_client=alice_http) as (a_read, a_write, _),
        ClientSession(a_read, a_write) as alice_session,
        _agent({"X-API-Key": bob_key}) as bob_http,
        streamable_http_client(url, http_client=bob_http) as (b_read, b_write, _),
        ClientSession(b_read, b_write) as bob_session,
    ):
        await alice_session.initialize()
        await bob_session.initialize()
        alice, bob = Agent(alice_session), Agent(bob_session)
        seen["tools"] = sorted(tool.name for tool in (await alice_session.list_tools()).tools)

        remembered = await alice.call("remember", {"text": HIKE, "session_id": "week"})
        assert not remembered.isError, remembered.content
        assert remembered.structuredContent is not None
        document_id = remembered.structuredContent["document_id"]
        seen["state"] = await alice.wait_done(document_id)

        recalled = await alice.call(
            "recall", {"query": "when did Maya's sister go hiking", "token_budget": 100}
        )
        seen["recalled"] = recalled.structuredContent

        # Bob's key: Alice's memory is neither found, nor its status read, nor forgotten
        bob_recall = await bob.call("recall", {"query": "when did Maya's sister go hiking"})
        seen["bob_recalled"] = bob_recall.structuredContent
        bob_status = await bob.call("memory_status", {"document_id": document_id})
        seen["bob_status"] = bob_status.structuredContent
        seen["bob_forget"] = await bob.call("forget", {"document_id": document_id})
        seen["still_there"] = (await alice.call("recall", {"query": "Mount Tam hike"})).structuredContent

        forgotten = await alice.call("forget", {"document_id": document_id})
        seen["forgotten"] = forgotten.structuredContent
        seen["after"] = (await alice.call("recall", {"query": "Mount Tam hike"})).structuredContent
        seen["document_id"] = document_id
    return seen


def test_a_remote_agent_remembers_recalls_and_forgets_its_own_memory_only(
    mcp_url: str, keys: KeyMaker, tenant: str
) -> None:
    seen = asyncio.run(_two_tenants(mcp_url, keys(tenant).key, keys(f"{tenant}-bob").key))

    assert seen["tools"] == ["entities", "forget", "memory_status", "recall", "remember", "search_memory"]
    assert seen["state"] == "done"
    recalled = seen["recalled"]
    assert [m["document_id"] for m in recalled["memories"]] == [seen["document_id"]]
    assert recalled["context"] and "Mount Tam" in recalled["context"]
    assert 0 < recalled["context_tokens"] <= 100

    assert seen["bob_recalled"]["memories"] == []
    assert seen["bob_status"]["state"] == "unknown"
    refused = seen["bob_forget"]
    assert refused.isError and "no memory with document_id" in refused.content[0].text
    assert [m["document_id"] for m in seen["still_there"]["memories"]] == [seen["document_id"]]

    assert seen["forgotten"]["memories"] == 1
    assert seen["after"]["memories"] == []


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer egk_not-a-key"}, {"X-API-Key": "egk_not-a-key"}],
    ids=["no-key", "wrong-bearer", "wrong-x-api-key"],
)
def test_a_request_without_a_good_key_is_refused_before_the_mcp_server(
    mcp_url: str, headers: dict[str, str]
) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    answer = httpx.post(
        mcp_url,
        json=initialize,
        headers={**headers, "Accept": "application/json, text/event-stream"},
        timeout=30,
    )
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == 'Bearer realm="engram"'
    assert "key" in answer.json()["detail"]


async def _sdk_client_with(url: str, key: str) -> BaseException | None:
    try:
        async with (
            _agent({"Authorization": f"Bearer {key}"}) as http,
            streamable_http_client(url, http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await asyncio.wait_for(session.initialize(), 30)
    except BaseException as exc:  # the SDK raises its transport's error in an exception group
        return exc
    return None


def test_the_sdk_client_with_a_wrong_key_gets_no_session(mcp_url: str) -> None:
    error = asyncio.run(_sdk_client_with(mcp_url, "egk_not-a-key"))

    # The SDK's transport raises the HTTP error of its first POST (in its task group's group)
    assert isinstance(error, BaseExceptionGroup), repr(error)
    matched, _ = error.split(httpx.HTTPStatusError)
    assert matched is not None, repr(error)
    assert [e.response.status_code for e in matched.exceptions if isinstance(e, httpx.HTTPStatusError)] == [
        401
    ]


def test_an_admin_key_is_refused_as_no_tenant(mcp_url: str, keys: KeyMaker) -> None:
    answer = httpx.post(
        mcp_url,
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        headers={"X-API-Key": keys(None).key, "Accept": "application/json, text/event-stream"},
        timeout=30,
    )
    assert answer.status_code == 403
    assert "tenant key" in answer.json()["detail"]


# Issue 25, finding 4: the HTTP app's limits on slow, large and odd requests, on MCP too.


def _port(url: str) -> int:
    port = httpx.URL(url).port
    assert port is not None
    return port


def test_a_client_sending_half_a_header_is_closed_after_the_header_timeout(mcp_url: str) -> None:
    # Given a connection that sends part of a request's headers and then nothing
    started = time.monotonic()
    answer, closed = exchange(
        _port(mcp_url), b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A", wait_s=SLOW_S * 5
    )

    # Then it is answered 408 and closed once ENGRAM_API_HEADER_TIMEOUT_S has passed
    assert closed and answer.startswith(b"HTTP/1.1 408"), answer
    assert time.monotonic() - started < SLOW_S * 4


def test_a_body_that_does_not_arrive_is_a_408_after_the_body_timeout(mcp_url: str, keys: KeyMaker) -> None:
    key = keys(f"mcp-slow-{uuid.uuid4().hex[:8]}").key
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\nAccept: {ACCEPT}\r\nContent-Length: 100\r\n\r\n"
    )
    answer, closed = exchange(_port(mcp_url), head.encode() + b'{"jsonrpc"', wait_s=SLOW_S * 5)

    assert closed and answer.startswith(b"HTTP/1.1 408"), answer
    assert b"ENGRAM_API_BODY_TIMEOUT_S" in answer


def _post(url: str, key: str, content: bytes) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}", "Accept": ACCEPT, "Content-Type": "application/json"}
    return httpx.post(url, content=content, headers=headers, timeout=60)


def _call(name: str, arguments: dict[str, Any], id_: str = "1") -> bytes:
    body = f'{{"jsonrpc": "2.0", "id": {id_}, "method": "tools/call", "params": '
    return (body + json.dumps({"name": name, "arguments": arguments}) + "}").encode()


def test_a_body_over_what_a_tool_call_can_need_is_refused_unread(mcp_url: str, keys: KeyMaker) -> None:
    key = keys(f"mcp-big-{uuid.uuid4().hex[:8]}").key
    big = _call("remember", {"text": "x" * (7 * 1_000_000)})

    answer = _post(mcp_url, key, big)

    assert answer.status_code == 413, answer.text
    assert "ENGRAM_MAX_REQUEST_BYTES" in answer.json()["detail"] or "limit" in answer.json()["detail"]


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("duplicate-keys", b'{"jsonrpc": "2.0", "id": 1, "id": 2, "method": "tools/list"}'),
        ("nan-id", _call("recall", {"query": "x"}, id_="NaN")),
        (
            "deep-nesting",
            _call("recall", {"query": "x"})[:-1] + b', "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        ),
    ],
)
def test_json_the_http_app_refuses_is_refused_here_too(
    mcp_url: str, keys: KeyMaker, name: str, body: bytes
) -> None:
    key = keys(f"mcp-json-{uuid.uuid4().hex[:8]}").key

    answer = _post(mcp_url, key, body)

    # A 422 naming the problem: never a 500, never taken
    assert answer.status_code == 422, (name, answer.status_code, answer.text[:300])


def test_a_tool_called_with_an_argument_it_does_not_take_refuses_it(mcp_url: str, keys: KeyMaker) -> None:
    key = keys(f"mcp-args-{uuid.uuid4().hex[:8]}").key

    answer = _post(mcp_url, key, _call("remember", {"text": "A fine note.", "colour": "red"}))

    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    assert result["isError"] is True and "colour" in result["content"][0]["text"], result
