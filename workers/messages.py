"""What a stage message names: its batch, and the (document key, version) pairs of its documents.

Read by the stage tasks (workers/stage.py) to record a batch's failure, and by the log and metric
signals (workers/observe.py) to put a task's ids on its log lines, without its text. Both import
it; it imports neither, nor the Celery app.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shared.ids import document_key
from shared.models import DocumentIn
from shared.services.refs import DocRef, refs


def batch_of(args: Sequence[Any], task_id: str) -> str:
    """The staged batch a stage message names: an embed or write task's first argument, else (the
    ingest task, whose first argument is its documents) its own task id."""
    return args[0] if args and isinstance(args[0], str) else task_id


def batch_refs(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[DocRef]:
    documents = kwargs.get("documents")
    if documents is None and args:
        documents = args[-1] if isinstance(args[-1], list) else None
    if not documents:
        return []
    if isinstance(documents[0], dict):  # the ingest message: documents with their version
        found: list[DocRef] = []
        for raw in documents:
            try:
                fields = {k: v for k, v in raw.items() if k not in ("version", "force")}
                doc = DocumentIn.model_validate(fields)
            except ValueError:
                continue
            found.append((document_key(doc.user_id, doc.document_id), int(raw.get("version", 0))))
        return found
    return refs(documents)
