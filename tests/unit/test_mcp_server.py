"""The MCP tools over a fake of the client Protocol: what reaches Engram, what the agent gets back."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from mcp.server.fastmcp.exceptions import ToolError

from producers.mcp.server import build_server
from shared.errors import SearchTimeout
from shared.graph.models import EntityDetail, EntityPage, EntitySummary
from shared.models import (
    DeleteResult,
    DocumentIn,
    DocumentStatus,
    IngestAccepted,
    SearchRequest,
    SearchResponse,
    SearchResult,
)

CAROLINE = EntitySummary(key="caroline", name="Caroline", kind="person", aliases=["Caroline"], memories=3)


class FakeClient:
    def __init__(self, results: list[SearchResult] | None = None, fail: Exception | None = None) -> None:
        self.documents: list[DocumentIn] = []
        self.requests: list[SearchRequest] = []
        self.results = results or []
        self.fail = fail
        self.entity_calls: list[tuple[str, str | None, int]] = []
        self.deleted: list[tuple[str, str]] = []

    def ingest(self, documents: Sequence[DocumentIn]) -> IngestAccepted:
        self.documents.extend(documents)
        ids = [d.document_id for d in documents]
        return IngestAccepted(accepted=len(ids), version=7, document_ids=ids, task_ids=["t"])

    def search(self, request: SearchRequest, timeout_s: float | None = None) -> SearchResponse:
        if self.fail is not None:
            raise self.fail
        self.requests.append(request)
        return SearchResponse(
            query=request.query,
            results=self.results,
            count=len(self.results),
            embedding_time_ms=1.0,
            search_time_ms=2.0,
            source="neo4j",
            method="engram",
            context="\n\n".join(r.content for r in self.results) or None,
            context_tokens=12 if self.results else None,
        )

    def status(self, user_id: str, document_id: str) -> DocumentStatus:
        return DocumentStatus(document_id=document_id, user_id=user_id, state="done", chunks=1)

    def list_entities(
        self,
        user_id: str,
        prefix: str | None = None,
        text: str | None = None,
        kind: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> EntityPage:
        self.entity_calls.append((user_id, prefix, limit))
        return EntityPage(entities=[CAROLINE])

    def get_entity(self, user_id: str, name: str) -> EntityDetail | None:
        self.entity_calls.append((user_id, name, 0))
        return (
            EntityDetail(**CAROLINE.model_dump(), mentioned_in=[], related=[]) if name == "Caroline" else None
        )

    def delete_document(self, user_id: str, document_id: str) -> DeleteResult:
        self.deleted.append((user_id, document_id))
        found = document_id == "d1"
        return DeleteResult(
            version=9, memories=2 if found else 0, documents=int(found), qdrant_confirmed=found
        )


def call(client: FakeClient, tool: str, arguments: dict[str, Any], server: Any = None) -> dict[str, Any]:
    result = asyncio.run((server or build_server(client, "alice")).call_tool(tool, arguments))
    assert isinstance(result, tuple)
    structured: dict[str, Any] = result[1]
    return structured


def test_remember_enqueues_one_document_of_the_servers_tenant() -> None:
    client = FakeClient()

    answer = call(
        client,
        "remember",
        {"text": "We hiked Mount Tam on Saturday.", "session_id": "trip", "tags": ["hike"]},
    )

    (document,) = client.documents
    assert (document.user_id, document.session_id, document.tags) == ("alice", "trip", ["hike"])
    assert (document.memory_type, document.source) == ("conversation", "mcp")
    assert answer == {"document_id": document.document_id, "version": 7, "state": "queued"}


def test_search_memory_asks_for_the_tenant_with_filters_and_a_token_budget() -> None:
    found = SearchResult(
        id="m1",
        content="We hiked Mount Tam on Saturday.",
        similarity_score=0.61,
        score=0.7,
        memory_type="conversation",
        importance=0.5,
        document_id="d1",
        chunk_index=0,
        session_id="trip",
    )
    client = FakeClient([found])

    answer = call(client, "search_memory", {"query": "when did we hike", "session_id": "trip", "top_k": 3})

    (request,) = client.requests
    assert (request.user_id, request.top_k, request.token_budget) == ("alice", 3, 2000)
    assert request.filters.session_id == "trip"
    assert answer["context"] == "We hiked Mount Tam on Saturday."
    assert [(m["id"], m["score"], m["similarity_score"]) for m in answer["memories"]] == [("m1", 0.7, 0.61)]


@pytest.mark.parametrize(
    ("tool", "arguments", "says"),
    [
        ("remember", {"text": "   "}, "text"),
        ("remember", {"text": "ok", "importance": 3.0}, "importance"),
        ("search_memory", {"query": "x", "top_k": 0}, "top_k"),
        ("search_memory", {"query": "x", "tags": ["a\nb"]}, "tags"),
    ],
)
def test_bad_input_is_a_tool_error_that_says_what_and_enqueues_nothing(
    tool: str, arguments: dict[str, Any], says: str
) -> None:
    client = FakeClient()

    with pytest.raises(ToolError, match=f"invalid input: .*{says}"):
        call(client, tool, arguments)

    assert client.documents == [] and client.requests == []


def test_engrams_own_errors_reach_the_agent_in_one_line() -> None:
    client = FakeClient(fail=SearchTimeout("no query worker answered within 10 s"))

    with pytest.raises(ToolError, match="SearchTimeout: no query worker answered within 10 s"):
        call(client, "search_memory", {"query": "anything"})


def test_memory_status_is_the_tenants_document_state() -> None:
    assert call(FakeClient(), "memory_status", {"document_id": "d1"}) == {
        "document_id": "d1",
        "state": "done",
        "error": None,
        "chunks": 1,
    }


def test_entities_lists_by_prefix_or_shows_one_of_the_servers_tenant() -> None:
    client = FakeClient()

    listed = call(client, "entities", {"prefix": "car", "limit": 5})
    shown = call(client, "entities", {"name": "Caroline"})
    missing = call(client, "entities", {"name": "Nobody"})

    assert client.entity_calls == [("alice", "car", 5), ("alice", "Caroline", 0), ("alice", "Nobody", 0)]
    assert [e["key"] for e in listed["entities"]] == ["caroline"]
    assert shown["entity"]["name"] == "Caroline"
    assert missing == {"entity": None, "entities": []}


@pytest.mark.parametrize("arguments", [{"name": "!!!"}, {"prefix": " "}, {"limit": 0}])
def test_entities_refuses_a_name_with_nothing_to_match(arguments: dict[str, Any]) -> None:
    client = FakeClient()

    with pytest.raises(ToolError, match="InvalidInput"):
        call(client, "entities", arguments)
    assert client.entity_calls == []


def test_recall_is_the_search_with_a_token_budget() -> None:
    client = FakeClient()

    call(client, "recall", {"query": "when did we hike", "token_budget": 300})

    (request,) = client.requests
    assert (request.user_id, request.query, request.token_budget) == ("alice", "when did we hike", 300)


def test_forget_deletes_the_tenants_document_and_says_when_there_is_none() -> None:
    client = FakeClient()

    forgotten = call(client, "forget", {"document_id": "d1"})
    with pytest.raises(ToolError, match="InvalidInput: no memory with document_id 'nope'"):
        call(client, "forget", {"document_id": "nope"})

    assert forgotten == {"document_id": "d1", "memories": 2, "backup_confirmed": True}
    assert client.deleted == [("alice", "d1"), ("alice", "nope")]


def test_the_tenant_may_be_found_per_call() -> None:
    client = FakeClient()
    asked: list[object] = []

    def tenant_of(ctx: object) -> str:
        asked.append(ctx)
        return f"bob-{len(asked)}"

    server = build_server(client, tenant_of)
    call(client, "remember", {"text": "A note."}, server)
    call(client, "forget", {"document_id": "d1"}, server)

    assert [d.user_id for d in client.documents] == ["bob-1"]
    assert client.deleted == [("bob-2", "d1")]
