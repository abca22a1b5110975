"""``engram eval DATASET_DIR``: a BEIR-layout set through the real pipeline, measured.

The corpus is ingested through the queues (ingest → embed → write: Neo4j and Qdrant) into a
tenant of its own, ``eval-<folder name>``; ``--reuse`` skips that when the tenant already holds
every document. Then every judged query is searched through the query queue once per method —
BM25 alone, vectors alone, plain RRF, the weighted RRF and Engram's default — and the measures
BEIR reports are printed, with the latency of Engram's searches as the caller saw them.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from producers.client import EngramClient
from shared.errors import SearchTimeout
from shared.evaluation.beir import BeirSet, load_beir
from shared.evaluation.metrics import beir
from shared.ids import document_key
from shared.models import SearchMethod, SearchRequest

METHODS: tuple[SearchMethod, ...] = ("bm25", "vector", "rrf", "engram")
ABLATION: tuple[SearchMethod, ...] = ("weighted_rrf", "blend")
LABELS = {
    "bm25": "BM25 only (Lucene, tenant statistics)",
    "vector": "vector only (cosine)",
    "rrf": "plain RRF (k=60, equal weights)",
    "weighted_rrf": "weighted RRF (the keyword ratio)",
    "blend": "score blend (the keyword ratio)",
    "engram": "engram default (blend + feedback)",
}
TOP_K = 100


@dataclass
class Report:
    dataset: str
    documents: int
    queries: int
    ingest_s: float | None
    methods: dict[str, dict[str, float]] = field(default_factory=dict)
    latency_ms: dict[str, float] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        main = {
            m: {k: round(v, 4) for k, v in self.methods[m].items() if k != "ndcg@10_exp"} for m in METHODS
        }
        return {
            "dataset": self.dataset,
            "methods": main,
            "latency_ms": self.latency_ms,
            "ndcg@10_exp": {m: round(v["ndcg@10_exp"], 4) for m, v in self.methods.items()},
            "ablation": {
                m: {k: round(v, 4) for k, v in self.methods[m].items()} for m in (*METHODS, *ABLATION)
            },
            "documents": self.documents,
            "queries": self.queries,
            "ingest_s": self.ingest_s,
        }

    def table(self) -> str:
        lines = [
            f"{self.dataset}: {self.documents} documents, {self.queries} judged queries"
            + (f", ingested in {self.ingest_s:.0f} s" if self.ingest_s is not None else ", reused"),
            "",
            f"{'method':<40} {'nDCG@10':>8} {'(exp)':>7} {'R@10':>7} {'R@100':>7}",
        ]
        for method in (*METHODS[:3], *ABLATION, METHODS[3]):
            v = self.methods[method]
            lines.append(
                f"{LABELS[method]:<40} {v['ndcg@10']:>8.3f} {v['ndcg@10_exp']:>7.3f} "
                f"{v['recall@10']:>7.3f} {v['recall@100']:>7.3f}"
            )
        lines += [
            "",
            f"search latency through the query queue (engram, top_k {TOP_K}): "
            f"p50 {self.latency_ms['p50']:.1f} ms, p99 {self.latency_ms['p99']:.1f} ms",
        ]
        return "\n".join(lines)


def tenant_of(dataset: BeirSet) -> str:
    return f"eval-{dataset.name}"


def _bar(done: int, total: int, elapsed: float, width: int = 30) -> str:
    filled = int(width * done / total) if total else width
    return f"  [{'#' * filled}{'.' * (width - filled)}] {done}/{total} documents, {elapsed:.0f} s"


def ingest(client: EngramClient, dataset: BeirSet, reuse: bool, out: Callable[[str], None]) -> float | None:
    """Ingests the corpus into the set's tenant through the queues, with a progress bar; with
    ``reuse``, skips it when the tenant already holds every document (returns None)."""
    tenant = tenant_of(dataset)
    documents = dataset.documents(tenant)
    keys = [document_key(tenant, d.document_id) for d in documents]
    if reuse and client.stored_documents(keys) == len(keys):
        out(f"reusing tenant {tenant!r}: it holds all {len(keys)} documents")
        return None
    started = time.monotonic()
    accepted = client.ingest(documents)
    refs = [(key, accepted.version) for key in keys]
    interactive = sys.stderr.isatty()
    last = -1
    while True:
        states = client.states(refs)
        finished = states["done"] + states["failed"]
        elapsed = time.monotonic() - started
        if interactive:
            print("\r" + _bar(finished, len(keys), elapsed), end="", file=sys.stderr, flush=True)
        elif finished != last and (finished == len(keys) or int(elapsed) % 10 == 0):
            print(_bar(finished, len(keys), elapsed), file=sys.stderr, flush=True)
            last = finished
        if finished == len(keys):
            break
        if elapsed > 6 * 3600:
            raise SearchTimeout(f"ingestion not finished after {elapsed:.0f} s: {dict(states)}")
        time.sleep(1.0)
    if interactive:
        print(file=sys.stderr)
    if states["failed"]:
        out(f"warning: {states['failed']} documents failed to ingest")
    return time.monotonic() - started


def ranked_documents(client: EngramClient, request: SearchRequest) -> tuple[list[str], float]:
    """The documents of a search's results, best first, each once (its best chunk: MaxSim), and
    the milliseconds the caller waited."""
    started = time.perf_counter()
    response = client.search(request, timeout_s=60.0)
    waited = (time.perf_counter() - started) * 1000
    seen: dict[str, None] = {}
    for result in response.results:
        seen.setdefault(result.document_id, None)
    return list(seen), waited


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered) + 0.5) - 1))]


def run(folder: Path, reuse: bool, out: Callable[[str], None]) -> Report:
    dataset = load_beir(folder)
    client = EngramClient()
    try:
        return _measure(client, dataset, ingest(client, dataset, reuse, out))
    finally:
        client.close()


def _measure(client: EngramClient, dataset: BeirSet, ingest_s: float | None) -> Report:
    tenant = tenant_of(dataset)
    report = Report(dataset.name, len(dataset.corpus), len(dataset.queries), ingest_s)
    latencies: list[float] = []
    for method in (*METHODS, *ABLATION):
        results: dict[str, list[str]] = {}
        for query_id, text in dataset.queries.items():
            request = SearchRequest(query=text, user_id=tenant, top_k=TOP_K, method=method)
            results[query_id], waited = ranked_documents(client, request)
            if method == "engram":
                latencies.append(waited)
        report.methods[method] = beir(results, dataset.qrels)
    report.latency_ms = {
        "p50": round(statistics.median(latencies), 2) if latencies else 0.0,
        "p99": round(percentile(latencies, 0.99), 2),
    }
    return report


def main(folder: Path, reuse: bool, as_json: bool) -> int:
    def say(line: str) -> None:
        print(line, file=sys.stderr if as_json else sys.stdout, flush=True)

    report = run(folder, reuse, say)
    print(json.dumps(report.as_json()) if as_json else report.table())
    return 0
