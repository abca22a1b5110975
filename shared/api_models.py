"""Request bodies and the error body of the HTTP API that are not in ``shared.models``: the app
(``producers.http.app``) and its SDK (``producers.sdk``) both use them, so they live here, where
importing them loads only pydantic (no Celery, no Neo4j driver, no settings).

The wire shape is the app's: the OpenAPI document names them as the classes are named.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool

from shared.models import TENANT_FROM_KEY, DocumentBody, Identifier, SearchFilters

__all__ = ["DeleteWhere", "DocumentBatch", "DocumentList", "Problem", "ProblemItem", "at_most_a_batch"]


class ProblemItem(BaseModel):
    """One thing wrong with a request: where (``loc``, as FastAPI names it) and what."""

    loc: list[str | int] = Field(description='Where, e.g. ["body", "documents", 0, "text"].')
    msg: str
    type: str


class Problem(BaseModel):
    """The body of every error answer, whatever the status."""

    detail: str = Field(description="What went wrong, in one line.")
    errors: list[ProblemItem] = Field(
        default_factory=list, description="Each invalid field, for a 422 of validation."
    )
    service: str | None = Field(None, description="The service that is down, for a 503.")


def at_most_a_batch(value: Any) -> Any:
    """Counts the documents before any is validated: the cost of a request is bounded by
    ENGRAM_MAX_BATCH_DOCUMENTS, never by how many errors a million bad items would make."""
    from shared.settings import get_settings  # the app's limit; a client never validates a batch

    limit = get_settings().max_batch_documents
    if isinstance(value, list) and len(value) > limit:
        raise ValueError(
            f"{len(value)} documents in one request; the limit is {limit} (ENGRAM_MAX_BATCH_DOCUMENTS)"
        )
    return value


DocumentList = Annotated[list[DocumentBody], BeforeValidator(at_most_a_batch), Field(min_length=1)]


class DocumentBatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    documents: DocumentList
    force: StrictBool = Field(
        False, description="Chunk, embed and write every document even when it is unchanged since stored."
    )


def _names_a_filter_or_everything(schema: dict[str, Any]) -> None:
    """The rule of ``delete_where`` in the OpenAPI document: a filter with a value, or everything."""
    some_filter = [
        {"required": [name], "properties": {name: {"not": {"type": "null"}}}}
        for name in SearchFilters.model_fields
    ]
    schema["anyOf"] = [
        {"required": ["everything"], "properties": {"everything": {"const": True}}},
        {"required": ["filters"], "properties": {"filters": {"anyOf": some_filter}}},
    ]


class DeleteWhere(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_names_a_filter_or_everything)

    user_id: Identifier | None = Field(None, description=TENANT_FROM_KEY)
    filters: SearchFilters = Field(default_factory=SearchFilters)
    everything: StrictBool = Field(False, description="Required to delete all of the tenant's memories.")
