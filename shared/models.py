"""What crosses process boundaries: documents in, staged chunks, memories, search and status."""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    StrictBool,
    StrictFloat,
    StringConstraints,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from shared.ids import content_hash, default_document_id

# Formats of the OpenAPI document for what its types alone cannot say: a client (or a fuzzer) told
# the format knows what is taken.
IDENTIFIER_FORMAT = "identifier"
READABLE_TEXT_FORMAT = "readable-text"


@dataclass(frozen=True, slots=True)
class InSchema:
    """Keywords added to a type's JSON schema, for a rule a validator enforces."""

    format: str | None = None
    description: str | None = None
    max_length: int | None = None
    pattern: str | None = None

    def __get_pydantic_json_schema__(
        self, core: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core)
        keywords = {
            "format": self.format,
            "description": self.description,
            "maxLength": self.max_length,
            "pattern": self.pattern,
        }
        schema.update({key: value for key, value in keywords.items() if value is not None})
        return schema


# Characters no identifier may hold: controls (ids are joined with one), format characters (zero
# width: "ali\u200bce" would look like "alice"), surrogates, private use, unassigned, and line or
# paragraph separators.
_NOT_IN_ID = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")


def _normal_identifier(value: str) -> str:
    """Identifiers are taken only in one form, never rewritten: a tenant "\u00a0alice" is refused,
    not read as "alice". So the same bytes name the same thing on every path (body, query, URL)."""
    if value != value.strip():
        raise ValueError("must not begin or end with white space (of any kind)")
    if not unicodedata.is_normalized("NFC", value):
        raise ValueError("must be in Unicode normal form NFC")
    if any(unicodedata.category(character) in _NOT_IN_ID for character in value):
        raise ValueError("must not hold control, format (zero-width), private-use or unassigned characters")
    return value


# What a regular expression can say of the rule (the format says the rest: NFC, assigned): no
# white space at either end, no control, zero-width, bidi, separator or private-use character.
_UNSEEN_CLASS = r"\x00-\x1f\x7f-\x9f\u00ad\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ue000-\uf8ff"
IDENTIFIER_PATTERN = rf"^[^\s{_UNSEEN_CLASS}](?:[^{_UNSEEN_CLASS}]*[^\s{_UNSEEN_CLASS}])?$"

Identifier = Annotated[
    str,
    StringConstraints(min_length=1, max_length=256),
    AfterValidator(_normal_identifier),
    InSchema(format=IDENTIFIER_FORMAT, pattern=IDENTIFIER_PATTERN),
]
ShortText = Annotated[str, StringConstraints(max_length=1024)]
METADATA_MAX_KEYS = 64
METADATA_MAX_CHARS = 4096
# The length is checked by _bounded_metadata, which names the key.
MetadataValue = Annotated[str, InSchema(max_length=METADATA_MAX_CHARS)] | int | float | bool | None


def _bounded_metadata(metadata: dict[str, MetadataValue]) -> dict[str, MetadataValue]:
    """Metadata is one level of scalars (so its depth is 1): at most 64 keys, and text values of at
    most 4,096 characters each."""
    for key, value in metadata.items():
        if isinstance(value, str) and len(value) > METADATA_MAX_CHARS:
            raise ValueError(
                f"the value of {key!r} is {len(value)} characters; the limit is {METADATA_MAX_CHARS}"
            )
    return metadata


# Neo4j stores a datetime's offset only within +-18:00.
_MAX_OFFSET = timedelta(hours=18)


def _readable(character: str) -> bool:
    """A letter, number, punctuation or symbol; not U+FFFD (what undecodable bytes became), not a
    combining mark on its own, not white space, control or zero-width characters."""
    return unicodedata.category(character)[0] in "LNPS" and character != "\ufffd"


def _not_blank(text: str) -> str:
    """Refuses text with nothing a model could read, which would fail only later, in a worker."""
    if not any(_readable(character) for character in text):
        raise ValueError(
            "text has nothing to read: empty, or only white space, control, zero-width or combining "
            "characters, or U+FFFD"
        )
    return text


# Text is taken when it holds something to read; the OpenAPI document names the rule a format.
ReadableText = Annotated[str, AfterValidator(_not_blank), InSchema(format=READABLE_TEXT_FORMAT)]


def _utc(moment: datetime | None) -> datetime | None:
    """A moment without an offset is UTC; one Neo4j cannot store (an offset beyond +-18:00, or a
    moment that is outside years 1-9999 in UTC) is refused here rather than in the write."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    offset = moment.utcoffset()
    if offset is not None and abs(offset) > _MAX_OFFSET:
        raise ValueError("the offset must be within +-18:00")
    try:
        moment.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError("the moment is outside years 1-9999 in UTC") from exc
    return moment


def _not_a_number(value: Any) -> Any:
    """A moment is RFC 3339 text (or a datetime), as the OpenAPI document says: pydantic alone would
    also read a number, or text of one, as seconds since 1970."""
    if isinstance(value, int | float) or (isinstance(value, str) and _NUMBER.fullmatch(value.strip())):
        raise ValueError("a moment is RFC 3339 text such as 2024-05-01T12:00:00Z, not a number")
    return value


def a_json_number(value: Any) -> Any:
    """A JSON number, whole (5.0 is 5, as JSON Schema's integer has it); never text or a boolean,
    which pydantic alone would read as one."""
    if isinstance(value, bool | str):
        raise ValueError("must be a number")
    return value


_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")

# A moment as Engram takes it from a caller: UTC when it has no offset, and storable by Neo4j.
Moment = Annotated[
    datetime,
    BeforeValidator(_not_a_number),
    AfterValidator(_utc),
    InSchema(description="An offset within +-18:00, and a moment within years 1-9999 in UTC."),
]


def utc_now() -> datetime:
    return datetime.now(UTC)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def utc_from_micros(micros: int) -> datetime:
    """A moment read from Neo4j as epoch microseconds (cheaper than the driver's DateTime)."""
    return _EPOCH + timedelta(microseconds=micros)


class DocumentFields(BaseModel):
    """A document's fields but its tenant: ``DocumentIn`` names the tenant, ``DocumentBody`` may
    leave it to the caller's API key."""

    model_config = ConfigDict(extra="forbid")

    text: ReadableText
    id: Identifier | None = Field(None, description="Stable id within the tenant; from the text if absent.")
    project_id: Identifier | None = None
    session_id: Identifier | None = None
    title: ShortText | None = None
    source: ShortText | None = None
    uri: ShortText | None = None
    memory_type: Identifier = "document"
    tags: list[Identifier] = Field(default_factory=list, max_length=64)
    # Strict: a number is a number, as the OpenAPI document says (pydantic alone reads false as 0).
    importance: StrictFloat = Field(0.5, ge=0.0, le=1.0)
    confidence: StrictFloat = Field(1.0, ge=0.0, le=1.0)
    metadata: Annotated[dict[Identifier, MetadataValue], AfterValidator(_bounded_metadata)] = Field(
        default_factory=dict, max_length=METADATA_MAX_KEYS
    )
    created_at: Moment | None = None
    position: Annotated[int, Field(ge=0, le=2**53), BeforeValidator(a_json_number)] | None = Field(
        None,
        description="The turn's place in its session: ordered by it when given, else by created_at.",
    )

    @property
    def document_id(self) -> str:
        """The caller's id, else one made from the text and where it was said (session, project,
        time): the turn "ok" in two sessions is two memories, posting the same turn again is one."""
        if self.id:
            return self.id
        said_at = self.created_at.isoformat() if self.created_at else None
        return default_document_id(self.text, self.session_id, self.project_id, said_at)


class DocumentIn(DocumentFields):
    """One document or conversation turn, as a producer hands it in."""

    user_id: Identifier = Field(description="The tenant; every memory and search belongs to one.")

    def fingerprint(self) -> str:
        """Every field as JSON, hashed: the same for a document and its copy that crossed the broker,
        different when the text or anything said about it (metadata, tags, title...) differs."""
        fields = json.dumps(self.model_dump(mode="json"), sort_keys=True, ensure_ascii=False)
        return content_hash(fields)


TENANT_FROM_KEY = "The tenant. Taken from the API key when absent; a tenant key refuses any other (403)."


class DocumentBody(DocumentFields):
    """A document as the HTTP API takes it: the tenant comes from the caller's key."""

    user_id: Identifier | None = Field(None, description=TENANT_FROM_KEY)
    force: StrictBool = Field(
        False, description="Chunk, embed and write it even when it is unchanged since it was stored."
    )

    def for_tenant(self, tenant: str) -> DocumentIn:
        fields = self.model_dump(exclude={"user_id", "force"})
        return DocumentIn.model_validate({**fields, "user_id": tenant})


class ChunkRecord(BaseModel):
    """One chunk of a document as it waits in staging between the stages."""

    id: str
    chunk_index: int
    content: str
    content_hash: str
    token_count: int


class StagedDocument(BaseModel):
    """A chunked document with everything the write stage needs but the vectors."""

    document: DocumentIn
    key: str
    version: int = Field(description="Fixed when the producer accepted it; an older one never wins.")
    content_hash: str
    received_at: datetime
    chunks: list[ChunkRecord]
    force: bool = Field(False, description="Embed every chunk: reuse no stored vector.")


class Memory(BaseModel):
    """One chunk of a document as both stores hold it: the Neo4j node's fields (without the
    vector and the sync state) and, the same fields, the Qdrant point's payload."""

    id: str
    document_key: str = ""
    document_id: str
    user_id: str
    chunk_index: int
    content: str
    key: str
    content_hash: str
    token_count: int
    memory_type: str = "document"
    project_id: str | None = None
    session_id: str | None = None
    position: int | None = None
    title: str | None = None
    tags: list[str] = Field(default_factory=list)
    importance: float = 0.5
    confidence: float = 1.0
    status: str = "active"
    created_at: datetime
    version: int
    embedding_model: str
    embedding_dim: int

    def payload(self) -> dict[str, Any]:
        """The Qdrant payload: JSON types, datetimes as ISO text."""
        return self.model_dump(mode="json")


class StoredVector(BaseModel):
    """A Memory with its vector, as read back from Neo4j for a sync."""

    memory: Memory
    embedding: list[float]
    extra: dict[str, Any] = Field(
        default_factory=dict, description="Payload fields beyond the Memory's: its document's, for a restore."
    )


class Tombstone(BaseModel):
    """A Memory deleted from Neo4j whose Qdrant point may still need deleting."""

    id: str
    version: int
    embedding_model: str | None = None
    embedding_dim: int | None = None


class PointState(BaseModel):
    """What the drift scan compares between the stores for one memory."""

    id: str
    version: int | None = None
    content_hash: str | None = None
    embedding_model: str | None = None


VectorSync = Literal["pending", "synced", "failed"]
DocumentState = Literal[
    "queued", "chunking", "embedding", "writing", "done", "failed", "deleted", "unchanged"
]
FINAL_STATES: frozenset[DocumentState] = frozenset({"done", "failed", "deleted", "unchanged"})
"""The states a document's ingestion ends in, at its version: a wait (the broker client's over a
load, the SDK's over a document) stops at these, and a poll over a load drops them."""


class SearchFilters(BaseModel):
    model_config = ConfigDict(extra="forbid")

    project_id: Identifier | None = None
    session_id: Identifier | None = None
    document_id: Identifier | None = None
    memory_types: list[Identifier] | None = Field(None, min_length=1, max_length=32)
    tags: list[Identifier] | None = Field(
        None, min_length=1, max_length=32, description="A memory matches if it has any of them."
    )
    from_date: Moment | None = None
    to_date: Moment | None = None
    statuses: list[Identifier] | None = Field(
        None, min_length=1, max_length=16, description="A memory matches if its status is one of them."
    )


SearchMethod = Literal["engram", "blend", "rrf", "weighted_rrf", "bm25", "vector"]


class SearchQuery(BaseModel):
    """A search but its tenant (see ``DocumentFields``)."""

    model_config = ConfigDict(extra="forbid")

    query: Annotated[ReadableText, StringConstraints(max_length=8192)]
    top_k: Annotated[int, Field(ge=1), BeforeValidator(a_json_number)] | None = None
    threshold: StrictFloat | None = Field(None, ge=-1.0, le=1.0)
    filters: SearchFilters = Field(default_factory=SearchFilters)
    method: SearchMethod = Field(
        "engram",
        description="engram (the configured search); the others are fixed baselines to compare it "
        "with (engram eval): bm25 or vector alone, plain rrf, weighted_rrf, blend (engram without "
        "feedback).",
    )
    neighbours: Annotated[int, BeforeValidator(a_json_number)] = Field(
        0, ge=0, le=5, description="Chunks before and after each result (along NEXT) to return with it."
    )
    token_budget: Annotated[int, Field(ge=1, le=100_000), BeforeValidator(a_json_number)] | None = Field(
        None,
        description="Results are cut to fit this many tokens, and returned as one `context` text too.",
    )
    now: Moment | None = Field(
        None,
        description="The moment a time named in the query ('last year', 'in May') is read from; the "
        "tenant's newest memory when absent.",
    )


class ScoreExplanation(BaseModel):
    """How a result's score was made, part by part."""

    method: SearchMethod
    similarity: float = Field(description="Cosine similarity of query and memory.")
    keyword: float | None = Field(None, description="BM25 of the query's words, tenant statistics.")
    keyword_share: float | None = Field(
        None, description="The BM25 as a share of the most the query's words can give."
    )
    feedback_similarity: float | None = Field(
        None, description="Cosine with the query vector moved toward the first round's best."
    )
    vector_rank: int | None = Field(None, description="Place among the candidates by similarity.")
    keyword_rank: int | None = Field(None, description="Place among candidates holding a query word.")
    fused: float = Field(description="The fused score of similarity and keyword score.")
    nudges: dict[str, float] = Field(default_factory=dict, description="Importance, type, recency, time.")
    rerank: float | None = Field(None, description="The reranker's score, when one is configured.")
    score: float


class SearchRequest(SearchQuery):
    user_id: Identifier


class SearchBody(SearchQuery):
    """A search as the HTTP API takes it: the tenant comes from the caller's key."""

    user_id: Identifier | None = Field(None, description=TENANT_FROM_KEY)

    def for_tenant(self, tenant: str) -> SearchRequest:
        return SearchRequest.model_validate({**self.model_dump(exclude={"user_id"}), "user_id": tenant})


class SearchResult(BaseModel):
    id: str
    content: str
    similarity_score: float = Field(description="Cosine similarity of query and memory.")
    score: float = Field(description="The ranking score: similarity plus the configured nudges.")
    memory_type: str
    importance: float
    document_id: str
    chunk_index: int
    title: str | None = None
    session_id: str | None = None
    project_id: str | None = None
    tags: list[str] = Field(default_factory=list)
    created_at: datetime | None = None
    token_count: int | None = None
    explanation: ScoreExplanation | None = None
    before: list[str] = Field(default_factory=list, description="Preceding chunks, nearest last.")
    after: list[str] = Field(default_factory=list, description="Following chunks, nearest first.")


class SearchResponse(BaseModel):
    query: str
    results: list[SearchResult]
    count: int
    embedding_time_ms: float
    search_time_ms: float
    source: Literal["neo4j", "qdrant"] = "neo4j"
    degraded: str | None = Field(None, description="Why the answer came from the backup, if it did.")
    method: SearchMethod = "engram"
    rounds: int = Field(1, description="Search rounds: 2 when the agentic round asked follow-ups.")
    follow_up_queries: list[str] = Field(default_factory=list)
    context: str | None = Field(None, description="The results as one text for an agent (token_budget).")
    context_tokens: int | None = None


class VectorSyncCounts(BaseModel):
    pending: int = 0
    synced: int = 0
    failed: int = 0


class DocumentStatus(BaseModel):
    document_id: str
    user_id: str
    state: DocumentState | Literal["unknown"]
    version: int | None = Field(None, description="The ingestion this state is about.")
    error: str | None = None
    chunks: int = 0
    chunks_reused: int | None = Field(
        None, description="Chunks of this version whose vector was the stored version's (not embedded)."
    )
    chunks_embedded: int | None = Field(None, description="Chunks of this version sent to the embedder.")
    vector_sync: VectorSyncCounts = Field(default_factory=VectorSyncCounts)
    updated_at: datetime | None = None


class TenantOverview(BaseModel):
    """``/api/status`` for one tenant: what it holds and how far Qdrant has it."""

    user_id: str
    documents: int
    memories: int
    vector_sync: VectorSyncCounts


class IngestAccepted(BaseModel):
    accepted: int
    version: int = Field(description="The version every document of this request is written at.")
    document_ids: list[str]
    task_ids: list[str]
    unchanged: list[str] = Field(
        default_factory=list,
        description="Documents already stored as given (same text, fields and model): not enqueued, "
        "no new version; their status says unchanged. `force` redoes them.",
    )


class MemoryRecord(Memory):
    """A Memory as the lifecycle API shows it: its fields, and how far Qdrant has it."""

    updated_at: datetime | None = None
    vector_sync: VectorSync | None = None
    vector_sync_error: str | None = None
    vector_sync_attempts: int = 0
    vector_synced_at: datetime | None = None


class MemoryPage(BaseModel):
    memories: list[MemoryRecord]
    next_cursor: str | None = Field(None, description="Pass as cursor for the next page; none at the end.")


class DeleteResult(BaseModel):
    version: int = Field(description="The delete's version: a write older than it cannot bring it back.")
    memories: int = Field(description="Memories deleted; 0 when nothing matched.")
    documents: int = Field(0, description="Documents deleted with their last Memory.")
    qdrant_confirmed: bool = Field(
        False, description="Qdrant has dropped them too; else the reconciler finishes the delete."
    )
