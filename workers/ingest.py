"""Stage 1, queue ``ingest``: chunk documents with the model's own tokenizer and stage them."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from shared.errors import InvalidInput
from shared.models import DocumentIn
from shared.services.chunk import Accepted
from workers.app import CHUNK_TASK, EMBED_TASK, app
from workers.stage import StageTask, container, retrying, send_next


def parse(documents: list[dict[str, Any]]) -> list[Accepted]:
    """The message's documents, each with the version its producer fixed."""
    try:
        return [
            Accepted(
                DocumentIn.model_validate({k: v for k, v in raw.items() if k != "version"}),
                int(raw["version"]),
            )
            for raw in documents
        ]
    except (ValidationError, KeyError, TypeError, ValueError) as exc:
        raise InvalidInput(f"ingest message is malformed: {exc}") from exc


@app.task(name=CHUNK_TASK, base=StageTask, bind=True)
def chunk_documents(
    self: StageTask, documents: list[dict[str, Any]], failing_since: float | None = None
) -> dict[str, Any]:
    """The batch id is this task's id, so a redelivered message re-stages the same batch."""
    batch_id: str = self.request.id
    batch = parse(documents)
    with retrying(self):
        result = container().chunk_stage.run(batch_id, batch)
        if result.staged:
            send_next(self, EMBED_TASK, (batch_id,), {"documents": result.staged})
    return {
        "batch_id": batch_id,
        "documents": len(result.staged),
        "failed": len(result.failed),
        "chunks": result.chunks,
    }
