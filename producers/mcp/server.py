"""An MCP server for agents: remember text and search it by meaning, as one tenant.

    engram mcp --user alice            # stdio: an agent (Claude Desktop, Cursor, ...) starts it
    engram mcp --http --port 8765      # streamable HTTP: the API key decides the tenant

On stdio it is a way in like the CLI: it runs beside the agent, on the machine that reaches Redis,
and the user who starts it chooses the tenant (no API key). Over HTTP (``producers.mcp.http``) each
request's API key decides its tenant, as on the HTTP app. ``remember`` enqueues a document through
the same queues as every producer; ``recall`` (also ``search_memory``) sends the search to the
query queue and returns Engram's ranked memories with a ``context`` text cut to a token budget,
ready to put in a prompt; ``memory_status`` says whether a remembered text is searchable yet;
``forget`` deletes a remembered document.

Input is checked by the same models as the HTTP API (``DocumentIn``, ``SearchRequest``): a tool
called with bad input gets an error result saying what is wrong, and nothing is enqueued.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial, wraps
from typing import Any, Literal, ParamSpec, Protocol, TypeVar

import anyio.to_thread
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from pydantic import BaseModel, Field, ValidationError

from shared.errors import EngramError, InvalidInput
from shared.graph.entities import normalise
from shared.graph.models import EntityDetail, EntityPage, EntitySummary
from shared.models import (
    DeleteResult,
    DocumentIn,
    DocumentStatus,
    IngestAccepted,
    SearchFilters,
    SearchRequest,
    SearchResponse,
    SearchResult,
)

P = ParamSpec("P")
R = TypeVar("R")

INSTRUCTIONS = (
    "Long-term memory. Call recall before answering anything that may depend on what was "
    "said or stored before (people, places, dates, decisions, preferences); put its `context` in "
    "your reasoning. Call remember with facts worth keeping, one turn or note at a time, and "
    "forget with a remembered document_id the user wants gone."
)

TenantOf = Callable[[Context[Any, Any, Any]], str]
"""Whose memory a tool call is about: one tenant (stdio), or the one of the request's API key."""
AsyncSearch = Callable[[SearchRequest], Awaitable[SearchResponse]]


class MemoryClient(Protocol):
    """What the tools need of Engram: ``producers.client.EngramClient`` is one."""

    def ingest(self, documents: Sequence[DocumentIn]) -> IngestAccepted: ...

    def search(self, request: SearchRequest, timeout_s: float | None = None) -> SearchResponse: ...

    def status(self, user_id: str, document_id: str) -> DocumentStatus: ...

    def list_entities(
        self,
        user_id: str,
        prefix: str | None = None,
        text: str | None = None,
        kind: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> EntityPage: ...

    def get_entity(self, user_id: str, name: str) -> EntityDetail | None: ...

    def delete_document(self, user_id: str, document_id: str) -> DeleteResult: ...


class MemorySearch(BaseModel):
    context: str | None = Field(description="The results as one text within the token budget.")
    context_tokens: int | None = None
    memories: list[SearchResult] = Field(description="Best first; without the score explanations.")
    source: str = Field(description="The store that answered: neo4j, or qdrant when Neo4j is down.")
    degraded: str | None = Field(None, description="Why the backup answered, when it did.")


class Remembered(BaseModel):
    document_id: str = Field(description="The id to ask memory_status about.")
    version: int
    state: Literal["queued"] = "queued"


class EntityLookup(BaseModel):
    entity: EntityDetail | None = Field(None, description="The entity named, with its memories.")
    entities: list[EntitySummary] = Field(default_factory=list, description="Entities, most mentioned first.")


class Forgotten(BaseModel):
    document_id: str
    memories: int = Field(description="Memories deleted: gone from search at once.")
    backup_confirmed: bool = Field(description="Whether the backup store dropped them too already.")


class MemoryState(BaseModel):
    document_id: str
    state: str = Field(description="queued, chunking, embedding, writing, done, failed or unknown.")
    error: str | None = None
    chunks: int = 0


def _tool_errors(function: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Bad input and Engram's own errors as the tool's error result, in one line each."""

    @wraps(function)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await function(*args, **kwargs)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in error['loc']) or 'input'}: {error['msg']}"
                for error in exc.errors()
            )
            raise ToolError(f"invalid input: {problems}") from exc
        except EngramError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc

    return wrapper


async def _blocking(function: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    """A call of the blocking client on a worker thread: the event loop serves other calls."""
    return await anyio.to_thread.run_sync(partial(function, *args, **kwargs))


def build_server(
    client: MemoryClient,
    user_id: str | TenantOf,
    default_token_budget: int = 2000,
    search: AsyncSearch | None = None,
    **options: Any,
) -> FastMCP:
    """The MCP server of a tenant's memory over ``client``: of ``user_id`` when it is a string,
    else of the tenant ``user_id(ctx)`` finds for each call. ``search`` answers searches (the
    client's own, on a thread, when None); ``options`` go to ``FastMCP`` (its HTTP settings)."""
    # no line per request
    server = FastMCP("engram", instructions=INSTRUCTIONS, log_level="WARNING", **options)
    tenant_of: TenantOf = (lambda _: user_id) if isinstance(user_id, str) else user_id

    async def searched(request: SearchRequest) -> SearchResponse:
        if search is not None:
            return await search(request)
        return await _blocking(client.search, request)

    @server.tool()
    @_tool_errors
    async def search_memory(
        ctx: Context[Any, Any, Any],
        query: str,
        top_k: int = 10,
        token_budget: int | None = default_token_budget,
        session_id: str | None = None,
        project_id: str | None = None,
        memory_types: list[str] | None = None,
        tags: list[str] | None = None,
        neighbours: int = 0,
    ) -> MemorySearch:
        """Search this user's memories by meaning and words. Returns the best memories, with a
        `context` text of them cut to `token_budget` tokens, ready to quote. Filters narrow the
        search to a session, a project, memory types or tags; `neighbours` adds the text just
        before and after each memory."""
        request = SearchRequest.model_validate(
            {
                "query": query,
                "user_id": tenant_of(ctx),
                "top_k": top_k,
                "token_budget": token_budget,
                "neighbours": neighbours,
                "filters": SearchFilters.model_validate(
                    {
                        "session_id": session_id,
                        "project_id": project_id,
                        "memory_types": memory_types,
                        "tags": tags,
                    }
                ),
            }
        )
        response = await searched(request)
        return MemorySearch(
            context=response.context,
            context_tokens=response.context_tokens,
            memories=[r.model_copy(update={"explanation": None}) for r in response.results],
            source=response.source,
            degraded=response.degraded,
        )

    server.tool(
        name="recall",
        description="Recall what this user's memories hold about `query`: the best memories, and "
        "a `context` text of them cut to `token_budget` tokens, ready to quote. Filters and "
        "`neighbours` as in search_memory.",
    )(search_memory)

    @server.tool()
    @_tool_errors
    async def remember(
        ctx: Context[Any, Any, Any],
        text: str,
        title: str | None = None,
        session_id: str | None = None,
        project_id: str | None = None,
        memory_type: str = "conversation",
        tags: list[str] | None = None,
        importance: float = 0.5,
        document_id: str | None = None,
    ) -> Remembered:
        """Keep a text (a conversation turn, a note, a fact) in this user's long-term memory. It is
        searchable once memory_status says `done` (usually within seconds). The same text in the
        same session is kept once; a `document_id` given again replaces that memory."""
        document = DocumentIn.model_validate(
            {
                "user_id": tenant_of(ctx),
                "text": text,
                "id": document_id,
                "title": title,
                "session_id": session_id,
                "project_id": project_id,
                "memory_type": memory_type,
                "tags": tags or [],
                "importance": importance,
                "source": "mcp",
            }
        )
        accepted = await _blocking(client.ingest, [document])
        return Remembered(document_id=accepted.document_ids[0], version=accepted.version)

    @server.tool()
    @_tool_errors
    async def memory_status(ctx: Context[Any, Any, Any], document_id: str) -> MemoryState:
        """Whether a remembered text is searchable yet: `done`, still on its way, or `failed`
        (with the reason)."""
        status = await _blocking(client.status, tenant_of(ctx), document_id)
        return MemoryState(
            document_id=status.document_id, state=status.state, error=status.error, chunks=status.chunks
        )

    @server.tool()
    @_tool_errors
    async def forget(ctx: Context[Any, Any, Any], document_id: str) -> Forgotten:
        """Forget a remembered text (the `document_id` remember gave): gone from this user's
        memory and from search at once."""
        tenant = tenant_of(ctx)
        result = await _blocking(client.delete_document, tenant, document_id)
        if result.memories == 0:
            raise InvalidInput(f"no memory with document_id {document_id!r} for this user")
        return Forgotten(
            document_id=document_id, memories=result.memories, backup_confirmed=result.qdrant_confirmed
        )

    @server.tool()
    @_tool_errors
    async def entities(
        ctx: Context[Any, Any, Any], name: str | None = None, prefix: str | None = None, limit: int = 20
    ) -> EntityLookup:
        """The people, places, organisations, things and dates this user's memories name. With
        `name`: that entity, the memories that mention it and the entities mentioned with it.
        Else the entities whose name starts with `prefix` (every one when absent), most
        mentioned first."""
        for label, value in (("name", name), ("prefix", prefix)):
            if value is not None and not normalise(value):
                raise InvalidInput(f"{label} has no letters or digits to match a name by")
        if not 1 <= limit <= 500:
            raise InvalidInput("limit is 1 to 500")
        tenant = tenant_of(ctx)
        if name is not None:
            return EntityLookup(entity=await _blocking(client.get_entity, tenant, name))
        page = await _blocking(client.list_entities, tenant, prefix=prefix, limit=limit)
        return EntityLookup(entities=page.entities)

    _refuse_unknown_arguments(server)
    return server


def _refuse_unknown_arguments(server: FastMCP) -> None:
    """Each tool refuses an argument it does not take, as the HTTP API's bodies do (the SDK's
    argument models ignore one): a misspelt ``top_k`` is an error, not a silent default."""
    for tool in server._tool_manager.list_tools():
        model = tool.fn_metadata.arg_model
        model.model_config["extra"] = "forbid"
        model.model_rebuild(force=True)
        tool.parameters["additionalProperties"] = False


def serve(user_id: str) -> None:
    """Runs the server on stdio until the agent closes it (``engram mcp`` checks the tenant)."""
    from producers.client import EngramClient

    client = EngramClient()
    client.ping()  # Redis unreachable: one clear line now, not an error on every tool call
    try:
        build_server(client, user_id).run("stdio")
    finally:
        client.close()
