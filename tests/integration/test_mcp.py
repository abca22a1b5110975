"""``engram mcp`` as an agent runs it: a subprocess on stdio, against the real queues and stores."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.integration.support import ROOT, Workers

pytestmark = pytest.mark.integration
ENGRAM = str(Path(sys.executable).with_name("engram"))


async def _session_scenario(tenant: str) -> dict[str, Any]:
    params = StdioServerParameters(
        command=ENGRAM, args=["mcp", "--user", tenant], env=dict(os.environ), cwd=ROOT
    )
    seen: dict[str, Any] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        seen["tools"] = sorted(tool.name for tool in (await session.list_tools()).tools)

        turns = [
            "Maya said her sister hiked up Mount Tam last Saturday.",
            "The dentist appointment moved to Tuesday at nine.",
        ]
        ids = []
        for turn in turns:
            remembered = await session.call_tool("remember", {"text": turn, "session_id": "week"})
            assert not remembered.isError, remembered.content
            assert remembered.structuredContent is not None
            ids.append(remembered.structuredContent["document_id"])
        deadline = time.monotonic() + 120
        states: list[str] = []
        while time.monotonic() < deadline:
            states = []
            for document_id in ids:
                status = await session.call_tool("memory_status", {"document_id": document_id})
                assert status.structuredContent is not None
                states.append(status.structuredContent["state"])
            if all(state in ("done", "failed") for state in states):
                break
            await asyncio.sleep(0.5)
        seen["states"] = states
        seen["ids"] = ids

        found = await session.call_tool(
            "search_memory", {"query": "when did Maya's sister go hiking", "top_k": 1, "session_id": "week"}
        )
        seen["found"] = found.structuredContent
        entity = await session.call_tool("entities", {"name": "Maya"})
        seen["entity"] = entity.structuredContent
        seen["bad"] = await session.call_tool("remember", {"text": "   "})
    return seen


def test_an_agent_remembers_and_finds_through_the_queues(workers: Workers, tenant: str) -> None:
    seen = asyncio.run(_session_scenario(tenant))

    # The agent sees the tools (the graph's entities too); both turns went through the pipeline
    assert seen["tools"] == ["entities", "forget", "memory_status", "recall", "remember", "search_memory"]
    assert seen["states"] == ["done", "done"]

    # The search finds the hiking turn (words in other forms: "hiking", "Maya's") with a context text
    found = seen["found"]
    assert [m["document_id"] for m in found["memories"]] == [seen["ids"][0]]
    assert found["source"] == "neo4j"
    assert found["context"] and "Mount Tam" in found["context"]

    # The entities the turns name: Maya, with the turn that names her
    assert seen["entity"]["entity"]["key"] == "maya"
    assert [m["id"] for m in seen["entity"]["entity"]["mentioned_in"]] == [found["memories"][0]["id"]]

    # Bad input is an error result that says what is wrong
    assert seen["bad"].isError
    assert "invalid input: text" in seen["bad"].content[0].text


def test_a_tenant_that_is_none_is_refused_before_serving() -> None:
    import subprocess

    refused = subprocess.run(
        [ENGRAM, "mcp", "--user", " "], capture_output=True, text=True, timeout=60, cwd=ROOT
    )

    assert refused.returncode == 2
    assert "--user ' '" in refused.stderr
