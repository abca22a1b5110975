"""What the entity API answers: entities, one entity with its memories and related entities."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from shared.graph.entities import EntityKind


class EntitySummary(BaseModel):
    key: str = Field(description="The normalised name the entity is resolved by within the tenant.")
    name: str = Field(description="The name as first written.")
    kind: EntityKind
    aliases: list[str] = Field(default_factory=list, description="Every way the memories wrote it (16 kept).")
    memories: int = Field(description="Memories that mention it.")


class EntityPage(BaseModel):
    entities: list[EntitySummary]
    next_offset: int | None = Field(None, description="Pass as offset for the next page; none at the end.")


class EntityMemory(BaseModel):
    id: str
    content: str
    document_id: str
    session_id: str | None = None
    memory_type: str = "document"
    created_at: datetime | None = None


class RelatedEntity(BaseModel):
    key: str
    name: str
    kind: EntityKind
    count: int = Field(description="Memories that mention both.")
    memory_ids: list[str] = Field(default_factory=list, description="Some of them (up to 10).")


class EntityDetail(EntitySummary):
    mentioned_in: list[EntityMemory] = Field(description="The newest memories that mention it.")
    related: list[RelatedEntity] = Field(description="Entities mentioned with it, most often first.")


class BackfillReport(BaseModel):
    memories: int = Field(description="Memories whose sessions and entities were derived again.")
