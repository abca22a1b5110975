"""A search's and the memory API's filters: the Cypher clause, and the parameters it reads.

Filters are fixed clauses over parameters; absent ones are switched off by a null.
"""

from __future__ import annotations

from typing import Any

from shared.models import SearchFilters

MEMORY_FILTER = """
m.user_id = $user_id
AND ($project_id IS NULL OR m.project_id = $project_id)
AND ($session_id IS NULL OR m.session_id = $session_id)
AND ($document_id IS NULL OR m.document_id = $document_id)
AND ($memory_types IS NULL OR m.memory_type IN $memory_types)
AND ($tags IS NULL OR any(tag IN m.tags WHERE tag IN $tags))
AND ($from_date IS NULL OR m.created_at >= $from_date)
AND ($to_date IS NULL OR m.created_at <= $to_date)
AND ($statuses IS NULL OR coalesce(m.status, 'active') IN $statuses)
"""


def filter_parameters(user_id: str, filters: SearchFilters) -> dict[str, Any]:
    """The tenant and filters as the parameters of MEMORY_FILTER; an absent filter is a null."""
    return {
        "user_id": user_id,
        "project_id": filters.project_id,
        "session_id": filters.session_id,
        "document_id": filters.document_id,
        "memory_types": filters.memory_types,
        "tags": filters.tags,
        "from_date": filters.from_date,
        "to_date": filters.to_date,
        "statuses": filters.statuses,
    }
