"""Stage 1, queue ``ingest``: chunk documents with the model's own tokenizer and stage them."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from shared.errors import InvalidInput
from shared.ids import document_key
from shared.models import DocumentIn
from shared.services.chunk import Accepted
from shared.services.refs import DocRef
from workers.app import CHUNK_TASK, EMBED_TASK, app
from workers.stage import StageTask, container, retrying, send_next

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Parsed:
    accepted: list[Accepted]
    refused: list[tuple[DocRef, str]]  # documents the message names that fail validation now


def parse(documents: list[dict[str, Any]]) -> Parsed:
    """The message's documents, each with the version its producer fixed. One that no longer
    validates (queued by an older producer, say) is refused alone, never with its batch."""
    if not isinstance(documents, list):
        raise InvalidInput("ingest message is malformed: documents is not a list")
    parsed = Parsed([], [])
    for raw in documents:
        try:
            fields = {k: v for k, v in raw.items() if k not in ("version", "force")}
            document = DocumentIn.model_validate(fields)
            parsed.accepted.append(Accepted(document, int(raw["version"]), raw.get("force") is True))
        except (ValidationError, KeyError, TypeError, ValueError, AttributeError) as exc:
            ref = _ref(raw)
            if ref is None:
                log.error("ingest message holds a document with neither tenant nor id: %s", exc)
            else:
                parsed.refused.append((ref, f"chunk: invalid document: {exc}"))
    return parsed


def _ref(raw: Any) -> DocRef | None:
    """The document a malformed entry names, when it names one plainly enough to record it."""
    if not isinstance(raw, dict):
        return None
    user_id, document_id, version = raw.get("user_id"), raw.get("id"), raw.get("version")
    if isinstance(user_id, str) and isinstance(document_id, str) and isinstance(version, int):
        return document_key(user_id, document_id), version
    return None


@app.task(name=CHUNK_TASK, base=StageTask, bind=True)
def chunk_documents(
    self: StageTask, documents: list[dict[str, Any]], failing_since: float | None = None
) -> dict[str, Any]:
    """The batch id is this task's id, so a redelivered message re-stages the same batch."""
    batch_id: str = self.request.id
    parsed = parse(documents)
    with retrying(self):
        for ref, reason in parsed.refused:
            container().progress.set([ref], "failed", reason, batch=batch_id)
        result = container().chunk_stage.run(batch_id, parsed.accepted)
        if result.staged:
            send_next(self, EMBED_TASK, (batch_id,), {"documents": result.staged})
    return {
        "batch_id": batch_id,
        "documents": len(result.staged),
        "failed": len(result.failed) + len(parsed.refused),
        "chunks": result.chunks,
    }
