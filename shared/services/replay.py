"""Re-driving documents that failed for good, from what is still staged.

A document records the batch it was last in. If that batch's chunks and vectors are staged, the
write is sent again; if only its chunks are, the embedding is; if nothing is (it failed before
staging, or staging expired after ``ENGRAM_STAGING_TTL_S``), it cannot be replayed and must be
posted again — the report names those. Replays are safe to repeat: every write is versioned.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from shared.progress import ProgressRecord
from shared.services.refs import DocRef, ProgressLog
from shared.staging import Staging

Stage = Literal["embed", "write"]
Send = Callable[[Stage, str, list[DocRef]], None]
"""Sends the stage's task for a batch and its documents."""


@dataclass(slots=True)
class ReplayReport:
    write: int = 0
    embed: int = 0
    not_staged: list[str] = field(default_factory=list)


class Replay:
    def __init__(self, staging: Staging, progress: ProgressLog, send: Send) -> None:
        self._staging = staging
        self._progress = progress
        self._send = send

    def run(self, failed: Mapping[str, ProgressRecord]) -> ReplayReport:
        report = ReplayReport()
        batches: dict[str, list[DocRef]] = defaultdict(list)
        for key, record in failed.items():
            if record.batch is None:
                report.not_staged.append(key)
            else:
                batches[record.batch].append((key, record.version))
        for batch_id, documents in batches.items():
            staged = self._staging.documents(batch_id)
            if staged is None:
                report.not_staged += [key for key, _ in documents]
                continue
            chunks = sum(len(doc.chunks) for doc in staged)
            stage: Stage = "write" if self._staging.vectors(batch_id, chunks) is not None else "embed"
            # Back to the stage it re-enters, so the status shows it moving again.
            self._progress.set(
                documents, "writing" if stage == "write" else "embedding", batch=batch_id, force=True
            )
            self._send(stage, batch_id, documents)
            if stage == "write":
                report.write += len(documents)
            else:
                report.embed += len(documents)
        return report
