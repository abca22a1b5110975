"""What the graph costs at ingest and what its search sources do, on a LoCoMo-layout set.

    .venv/bin/python ops/bench/graph_bench.py /path/to/locomo-dev [--limit-questions N]

Reads the set from where it lies (nothing is copied), posts nothing through the queues: every
turn becomes a Memory as the write stage makes it (tenant per conversation, one document per
turn, ``"<speaker>: <text>"``, its session, ``created_at`` the session's date plus one second per
turn) and is written with ``Neo4jStore.write_documents`` in batches of an ingest task's size,
once with entity extraction off and once with the built-in extractor (sessions and NEXT are made
either way), after the texts are embedded in-process with the configured embedder. It prints:

- the raw embedder's chunks/s on these texts (one call, and calls of an ingest task's size);
- the write's chunks/s with entities off and on, and what entities add per chunk as a share of
  the embedder's time per chunk (the pipeline's bound: writes overlap the next batch's embedding);
- evidence recall@5/10/20 of the 760 questions (categories 1-4) per search configuration: the
  baselines, the default, and the default with each graph source on.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from shared.embedding import make_embedder
from shared.graph.entities import BuiltinExtractor, NoExtractor
from shared.ids import content_hash, document_key, memory_id
from shared.models import ChunkRecord, DocumentIn, SearchFilters, SearchRequest, StagedDocument
from shared.search import Searcher
from shared.settings import get_settings
from shared.stores.base import DocumentWrite
from shared.stores.neo4j import Neo4jStore
from shared.stores.neo4j.graph import GraphWriter


def turns(sample: dict[str, Any], tenant: str) -> list[DocumentIn]:
    conversation = sample["conversation"]
    found = []
    n = 1
    while f"session_{n}" in conversation:
        said = datetime.strptime(conversation[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y")
        for place, turn in enumerate(conversation[f"session_{n}"]):
            found.append(
                DocumentIn(
                    user_id=tenant,
                    id=turn["dia_id"],
                    text=f"{turn['speaker']}: {turn['text']}",
                    session_id=f"{sample['sample_id']}-session_{n}",
                    memory_type="turn",
                    created_at=said.replace(tzinfo=UTC) + timedelta(seconds=place),
                )
            )
        n += 1
    return found


def staged(document: DocumentIn, version: int) -> StagedDocument:
    key = document_key(document.user_id, document.document_id)
    return StagedDocument(
        document=document,
        key=key,
        version=version,
        content_hash=content_hash(document.text),
        received_at=datetime.now(UTC),
        chunks=[
            ChunkRecord(
                id=memory_id(document.user_id, document.document_id, 0),
                chunk_index=0,
                content=document.text,
                content_hash=content_hash(document.text),
                token_count=len(document.text.split()),
            )
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--prefix", default="graphbench")
    parser.add_argument("--limit-questions", type=int, default=0)
    parser.add_argument("--skip-write", action="store_true", help="the tenants already hold the set")
    parser.add_argument("--skip-search", action="store_true", help="measure the write only")
    parser.add_argument(
        "--write-only", action="store_true", help="random unit vectors, no embedder: the write alone"
    )
    parser.add_argument("--only", nargs="*", help="search configurations whose label holds one of these")
    args = parser.parse_args()
    settings = get_settings()
    samples = json.loads(next(args.dataset.glob("*.json")).read_text())
    documents = {s["sample_id"]: turns(s, f"{args.prefix}-{s['sample_id']}") for s in samples}
    every = [d for ds in documents.values() for d in ds]
    texts = [d.text for d in every]

    embedder = make_embedder(settings)
    store = Neo4jStore(settings)
    if not args.skip_write:
        per_task = settings.ingest_batch_documents
        if args.write_only:
            rng = np.random.default_rng(1)
            vectors = rng.normal(size=(len(texts), embedder.dimension)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            task_calls = 0.0
        else:
            embedder.embed(texts[:64])  # warm-up
            started = time.perf_counter()
            vectors = embedder.embed(texts)
            one_call = len(texts) / (time.perf_counter() - started)
            started = time.perf_counter()
            for i in range(0, len(texts), per_task):
                embedder.embed(texts[i : i + per_task])
            task_calls = len(texts) / (time.perf_counter() - started)
            print(f"raw embedder: {one_call:.1f} chunks/s in one call, {task_calls:.1f} in {per_task}s")
        store.ensure_schema(embedder.model_name, embedder.dimension)
        version = int(time.time() * 1000)
        rates = {}
        for label, extractor, suffix in (
            ("entities off", NoExtractor(), "-off"),
            ("entities on (builtin)", BuiltinExtractor(settings.graph_max_entities), ""),
        ):
            writer = Neo4jStore(settings, graph=GraphWriter(extractor, settings.graph_related_entities))
            writes = []
            for doc, vector in zip(every, vectors, strict=True):
                moved = doc.model_copy(update={"user_id": doc.user_id + suffix})
                writes.append(DocumentWrite(staged(moved, version), [vector.tolist()], embedder.model_name))
            started = time.perf_counter()
            for i in range(0, len(writes), per_task):
                writer.write_documents(writes[i : i + per_task])
            rates[label] = len(writes) / (time.perf_counter() - started)
            writer.close()
            print(f"write, {label}: {rates[label]:.1f} chunks/s")
        added = 1 / rates["entities on (builtin)"] - 1 / rates["entities off"]
        print(f"entities add {added * 1000:.2f} ms per chunk to the write")
        if task_calls:
            print(f"that is {added * task_calls * 100:.1f}% of the embedder's time per chunk ({per_task}s)")

    if args.skip_search:
        store.close()
        return
    entities = {"search_entity_expansion": True}
    session = {"search_session_evidence": True}
    configs: dict[str, tuple[str, dict[str, Any]]] = {
        "bm25": ("bm25", {}),
        "vector": ("vector", {}),
        "rrf": ("rrf", {}),
        "engram (default)": ("engram", {}),
        "engram + entity candidates": ("engram", entities),
        "engram + session candidates": ("engram", session),
        "engram + entity lift 0.1": ("engram", {**entities, "search_entity_weight": 0.1}),
        "engram + entity lift 0.3": ("engram", {**entities, "search_entity_weight": 0.3}),
        "engram + session lift 0.05": ("engram", {**session, "search_session_weight": 0.05}),
        "engram + session lift 0.1": ("engram", {**session, "search_session_weight": 0.1}),
        "engram + session lift 0.15": ("engram", {**session, "search_session_weight": 0.15}),
        "engram + session lift 0.2": ("engram", {**session, "search_session_weight": 0.2}),
        "engram + session lift 0.3": ("engram", {**session, "search_session_weight": 0.3}),
        "engram + both lifts 0.1": (
            "engram",
            {**entities, **session, "search_entity_weight": 0.1, "search_session_weight": 0.1},
        ),
    }
    if args.only:
        configs = {label: config for label, config in configs.items() if any(o in label for o in args.only)}
    questions = [
        (s["sample_id"], q)
        for s in samples
        for q in s["qa"]
        if q.get("category") in (1, 2, 3, 4) and q.get("evidence")
    ]
    if args.limit_questions:
        questions = questions[: args.limit_questions]
    print(f"{len(questions)} questions; evidence recall@k over the first k distinct turns")
    print("| search | R@5 | R@10 | R@20 | cat 1 R@10 | cat 2 | cat 3 | cat 4 | p50 ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, (method, update) in configs.items():
        searcher = Searcher(store, embedder, settings.model_copy(update=update))
        recall: dict[int, list[float]] = defaultdict(list)
        by_category: dict[int, list[float]] = defaultdict(list)
        took = []
        for sample_id, q in questions:
            request = SearchRequest(
                query=q["question"],
                user_id=f"{args.prefix}-{sample_id}",
                top_k=20,
                method=method,
                filters=SearchFilters(),
            )
            started = time.perf_counter()
            found = searcher.search(request).results
            took.append((time.perf_counter() - started) * 1000)
            ranked = list(dict.fromkeys(r.document_id for r in found))
            evidence = {e.strip() for e in q["evidence"]}
            for k in (5, 10, 20):
                recall[k].append(len(evidence & set(ranked[:k])) / len(evidence))
            by_category[q["category"]].append(len(evidence & set(ranked[:10])) / len(evidence))
        means = [statistics.fmean(recall[k]) for k in (5, 10, 20)]
        cats = [statistics.fmean(by_category[c]) if by_category[c] else 0.0 for c in (1, 2, 3, 4)]
        cells = " | ".join(f"{v:.3f}" for v in [*means, *cats])
        print(f"| {label} | {cells} | {statistics.median(took):.0f} |", flush=True)
    store.close()


if __name__ == "__main__":
    main()
