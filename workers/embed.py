"""Stage 2, queue ``embed``: embed a staged batch's chunks; a long batch continues in a new task."""

from __future__ import annotations

import time
from typing import Any

from shared.services.refs import refs
from workers.app import EMBED_TASK, WRITE_TASK, app
from workers.stage import StageTask, container, retrying, send_next


@app.task(name=EMBED_TASK, base=StageTask, bind=True)
def embed_batch(
    self: StageTask, batch_id: str, documents: list[list[Any]], failing_since: float | None = None
) -> dict[str, Any]:
    # Embed for three quarters of the soft time limit, then hand the rest to a new task: every
    # task stays short, so a killed worker's task is redelivered soon and retried cheaply. The
    # stage starts no slice it expects to end past the deadline (by its slowest slice so far), so
    # the last quarter is headroom for a slice slower than that. (Half was chosen when a slice
    # could start just before the deadline and run on to the limit; with the check it split most
    # batches in two tasks, and a continuation waits behind every batch queued meanwhile.)
    deadline = time.monotonic() + container().settings.task_soft_time_limit_s * 0.75
    with retrying(self):
        # A retry (after a time limit, say) embeds in smaller slices: see EmbedStage.run.
        result = container().embed_stage.run(batch_id, deadline, retries=self.request.retries)
        next_task = WRITE_TASK if result.complete else EMBED_TASK
        if not result.already_written:
            send_next(self, next_task, (batch_id,), {"documents": refs(documents)})
    return {
        "batch_id": batch_id,
        "chunks": result.chunks,
        "embedded": result.embedded_now,
        "complete": result.complete,
        # Counted by the metrics (engram_embed_model_cpu_seconds): what the model costs in the pipeline.
        "model_cpu_s": round(result.model_cpu_s, 4),
        "backend": container().settings.embedding_backend,
    }
