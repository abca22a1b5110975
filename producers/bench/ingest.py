"""Ingestion through the queues against the raw embedder on the same chunks, with the CPU each
process of the stack spent meanwhile (where the time went).

The pipeline's figure is chunks stored per second of wall time, from the first enqueue until
every document is done. The raw embedder embeds the same chunks (the configured embedder, built
by the composition root, in this process) in calls of the embed stage's slice, on a sample of at
most ``RAW_SAMPLE`` chunks: its rate does not depend on how many there are.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from producers.bench.processes import cpu_by_role, cpu_spent
from producers.client import EngramClient
from producers.client.waiting import LoadProgress
from shared.container import Container
from shared.errors import SearchTimeout
from shared.ids import document_key
from shared.metrics import embed_model_cpu_s
from shared.models import DocumentIn

RAW_SAMPLE = 2000
RAW_CALL = 128
"""Chunks per call of the raw embedder: the embed stage's slice until it became one model call
(32); kept so that ratios measured before and after compare. The embedder's ceiling, all the
sample in one call (sorted by length as a whole: the least padding), is reported beside it."""


def load(
    client: EngramClient, documents: Sequence[DocumentIn], say: Callable[[str], None], timeout_s: float
) -> tuple[float, int]:
    """Enqueues the documents and waits until every one is finished; returns the wall seconds and
    how many failed (a pipeline that fails documents is a figure to report, not a crash)."""
    started = time.monotonic()
    accepted = client.ingest(documents)
    refs = [(document_key(d.user_id, d.document_id), accepted.version) for d in documents]
    progress = LoadProgress(refs)
    said = 0.0
    while True:
        states = progress.poll(client)
        finished = progress.finished
        elapsed = time.monotonic() - started
        if finished == len(refs):
            if states["failed"]:
                say(f"  ingest: {states['failed']} of {len(refs)} documents FAILED (see the workers' logs)")
            return time.monotonic() - started, states["failed"]
        if elapsed - said >= 10:
            said = elapsed
            left = f", ~{(len(refs) - finished) * elapsed / finished:.0f} s left" if finished else ""
            say(f"  ingest: {finished}/{len(refs)} documents in {elapsed:.0f} s{left}")
        if elapsed > timeout_s:
            raise SearchTimeout(f"ingestion not finished after {timeout_s:g} s: {dict(states)}")
        time.sleep(progress.pause())


def raw_rate(container: Container, texts: Sequence[str]) -> dict[str, float]:
    """Chunks/s of the configured embedder on ``texts`` (a warm-up call first)."""
    embedder = container.embedder
    sample = list(texts[:RAW_SAMPLE])
    embedder.embed(sample[: container.settings.embedding_batch_size])
    cpu_before = _own_cpu_s()
    started = time.perf_counter()
    for start in range(0, len(sample), RAW_CALL):
        embedder.embed(sample[start : start + RAW_CALL])
    elapsed = time.perf_counter() - started
    cpu = _own_cpu_s() - cpu_before
    started = time.perf_counter()
    embedder.embed(sample)
    one_call = time.perf_counter() - started
    return {
        "chunks": len(sample),
        "seconds": round(elapsed, 3),
        "chunks_per_s": len(sample) / elapsed,
        "cpu_s": round(cpu, 3),
        "one_call_chunks_per_s": len(sample) / one_call,
    }


def _own_cpu_s() -> float:
    """User and system CPU-seconds of this process, every thread of it (the embedder's too)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(
    client: EngramClient,
    container: Container,
    data_dir: Path,
    documents: Sequence[DocumentIn],
    say: Callable[[str], None],
    timeout_s: float,
) -> dict[str, Any]:
    chunker = container.chunker
    chunks = [chunk.text for d in documents for chunk in chunker.chunk(d.text)]
    before = cpu_by_role(data_dir)
    waiter_before = _own_cpu_s()
    model_before = embed_model_cpu_s(container.settings)
    wall, failed = load(client, documents, say, timeout_s)
    waiter_cpu = _own_cpu_s() - waiter_before
    cpu = cpu_spent(before, cpu_by_role(data_dir))
    model_cpu = embed_model_cpu_s(container.settings) - model_before
    # Chunks the store holds for these documents: those of a failed document are not counted.
    stored = client.chunk_count([document_key(d.user_id, d.document_id) for d in documents])
    pipeline = stored / wall
    say(
        f"  ingest: {stored} chunks stored in {wall:.1f} s ({pipeline:.1f}/s); "
        "raw embedder on the same chunks"
    )
    raw = raw_rate(container, chunks)
    # Chunks per CPU-second, the stack's against the raw embedder's: what the two rates' ratio
    # would be on a machine with nothing else running, and far steadier than it where the load
    # of other work moves (the raw rate moved 20.7-37.9 chunks/s within a minute here).
    stack_cpu = sum(cpu.values())
    raw_ms = 1000 * raw["cpu_s"] / raw["chunks"]
    cpu_ratio = (stored / stack_cpu) / (raw["chunks"] / raw["cpu_s"]) if stack_cpu and raw["cpu_s"] else None
    return {
        "documents": len(documents),
        "failed_documents": failed,
        "chunks": stored,
        "seconds": round(wall, 3),
        "chunks_per_s": pipeline,
        "raw": raw,
        "ratio": pipeline / raw["chunks_per_s"],
        "cpu_s": cpu,
        "cpu_ms_per_chunk": round(1000 * stack_cpu / stored, 1) if stored else None,
        "raw_cpu_ms_per_chunk": round(raw_ms, 2),
        # The stack's CPU outside the model: all of it less the raw embedder's CPU for as many chunks.
        "stack_cpu_ms_per_chunk": round(1000 * stack_cpu / stored - raw_ms, 2) if stored else None,
        # The model's CPU as the embed workers counted it in the pipeline, on cores it shares with the
        # rest of the stack, and all the stack's CPU less that: the stage's work around the model.
        "model_cpu_ms_per_chunk": round(1000 * model_cpu / stored, 2) if stored and model_cpu else None,
        "outside_model_cpu_ms_per_chunk": (
            round(1000 * (stack_cpu - model_cpu) / stored, 2) if stored and model_cpu else None
        ),
        "cpu_ratio": cpu_ratio,
        # This process's own CPU while it waited (enqueueing, then polling every document's
        # progress): taken from the same cores, though not the stack's.
        "waiter_cpu_s": round(waiter_cpu, 2),
        "cpu_share_of_wall": {role: round(s / wall, 3) for role, s in cpu.items()},
    }
