"""``engram eval PATH``: a BEIR-layout set or a LoCoMo-layout conversation set through the real
pipeline, measured; ``engram eval --suite DIR``: every set under DIR, one table.

A BEIR corpus is ingested through the queues (ingest → embed → write: Neo4j and Qdrant) into a
tenant of its own, ``eval-<folder name>``. A LoCoMo set is posted as a chat client would: one
tenant per conversation, each turn one document with its session and the moment it was said.
``--reuse`` skips the ingest when the tenants already hold every document. Then every judged query
is searched through the query queue once per method — BM25 alone, vectors alone, plain RRF, the
ablations and Engram's default — and the measures are printed (nDCG@10 and recall for BEIR,
evidence recall@5/10/20 overall and per category for LoCoMo), with each method's latency as the
caller saw it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from producers.client import EngramClient
from producers.client.waiting import LoadProgress
from shared.errors import InvalidInput, SearchTimeout
from shared.evaluation.beir import BeirSet, load_beir
from shared.evaluation.locomo import CATEGORIES, LocomoSet, load_locomo, locomo_file, recall_report
from shared.evaluation.metrics import beir
from shared.ids import document_key
from shared.models import DocumentIn, SearchMethod, SearchRequest

METHODS: tuple[SearchMethod, ...] = ("bm25", "vector", "rrf", "engram")
ABLATION: tuple[SearchMethod, ...] = ("weighted_rrf", "blend")
LABELS = {
    "bm25": "BM25 only (Lucene, tenant statistics)",
    "vector": "vector only (cosine)",
    "rrf": "plain RRF (k=60, equal weights)",
    "weighted_rrf": "weighted RRF (the keyword ratio)",
    "blend": "score blend (fixed keyword ratio 0.3)",
    "engram": "engram default (adaptive + time)",
}
TOP_K = 100
"""Results asked of a BEIR search (recall@100)."""
CONVERSATION_TOP_K = 20
"""Results asked of a conversation search (evidence recall@20)."""
DEFAULT_TOP_K = 10
"""The product's default top_k: latency is measured again at it, on up to LATENCY_QUERIES queries."""
LATENCY_QUERIES = 100

Say = Callable[[str], None]


@dataclass
class Report:
    dataset: str
    kind: str
    """``beir`` or ``locomo``."""
    documents: int
    queries: int
    ingest_s: float | None
    methods: dict[str, dict[str, float]] = field(default_factory=dict)
    latencies: dict[str, list[float]] = field(default_factory=dict)
    """Milliseconds each search of each method waited, as the caller saw it."""
    latencies_default: dict[str, list[float]] = field(default_factory=dict)
    """The same at the product's default top_k (10)."""

    @property
    def headline(self) -> str:
        """The measure a set is judged by: nDCG@10 for BEIR, evidence recall@10 for LoCoMo."""
        return "ndcg@10" if self.kind == "beir" else "recall@10"

    @property
    def latency_ms(self) -> dict[str, dict[str, float]]:
        return {m: latency_summary(v) for m, v in self.latencies.items()}

    @property
    def latency_default_ms(self) -> dict[str, dict[str, float]]:
        return {m: latency_summary(v) for m, v in self.latencies_default.items()}

    def as_json(self) -> dict[str, Any]:
        measures = (
            ("ndcg@10", "recall@10", "recall@100")
            if self.kind == "beir"
            else tuple(k for k in self.methods["engram"] if "/" not in k)
        )
        main = {m: {k: round(self.methods[m][k], 4) for k in measures} for m in METHODS}
        report: dict[str, Any] = {
            "dataset": self.dataset,
            "kind": self.kind,
            "methods": main,
            "latency_ms": self.latency_ms,
            f"latency_top{DEFAULT_TOP_K}_ms": self.latency_default_ms,
            "ablation": {
                m: {k: round(v, 4) for k, v in self.methods[m].items()} for m in (*METHODS, *ABLATION)
            },
            "documents": self.documents,
            "queries": self.queries,
            "ingest_s": self.ingest_s,
        }
        if self.kind == "beir":
            report["ndcg@10_exp"] = {m: round(v["ndcg@10_exp"], 4) for m, v in self.methods.items()}
        return report

    def table(self) -> str:
        unit = "judged queries" if self.kind == "beir" else "questions (categories 1-4)"
        lines = [
            f"{self.dataset}: {self.documents} documents, {self.queries} {unit}"
            + (f", ingested in {self.ingest_s:.0f} s" if self.ingest_s is not None else ", reused"),
            "",
        ]
        if self.kind == "beir":
            columns = [
                ("nDCG@10", "ndcg@10"),
                ("(exp)", "ndcg@10_exp"),
                ("R@10", "recall@10"),
                ("R@100", "recall@100"),
            ]
        else:
            columns = [("R@5", "recall@5"), ("R@10", "recall@10"), ("R@20", "recall@20")]
            columns += [(f"{label[:9]}@10", f"recall@10/{label}") for label in CATEGORIES.values()]
        lines.append(
            f"{'method':<40}"
            + "".join(f" {title:>12}" for title, _ in columns)
            + f" {'p50 ms':>8} {'p95 ms':>8} {f'p50@{DEFAULT_TOP_K}':>8}"
        )
        latency, default = self.latency_ms, self.latency_default_ms
        for method in (*METHODS[:3], *ABLATION, METHODS[3]):
            values = self.methods[method]
            lines.append(
                f"{LABELS[method]:<40}"
                + "".join(f" {values.get(key, 0.0):>12.3f}" for _, key in columns)
                + f" {latency[method]['p50']:>8.1f} {latency[method]['p95']:>8.1f}"
                + f" {default.get(method, {}).get('p50', 0.0):>8.1f}"
            )
        top_k = TOP_K if self.kind == "beir" else CONVERSATION_TOP_K
        lines += [
            "",
            f"search latency through the query queue, top_k {top_k}, each method in one run; "
            f"p50@{DEFAULT_TOP_K}: again at top_k {DEFAULT_TOP_K} (the default), "
            f"first {LATENCY_QUERIES} queries",
        ]
        return "\n".join(lines)


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered) + 0.5) - 1))]


def latency_summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "p50": round(statistics.median(values), 2) if values else 0.0,
        "p95": round(percentile(values, 0.95), 2),
        "p99": round(percentile(values, 0.99), 2),
    }


def tenant_of(dataset: BeirSet) -> str:
    return f"eval-{dataset.name}"


def _bar(done: int, total: int, elapsed: float, width: int = 30) -> str:
    filled = int(width * done / total) if total else width
    return f"  [{'#' * filled}{'.' * (width - filled)}] {done}/{total} documents, {elapsed:.0f} s"


def ingest(
    client: EngramClient, documents: Sequence[DocumentIn], label: str, reuse: bool, out: Say
) -> float | None:
    """Ingests the documents through the queues, with a progress bar; with ``reuse``, skips it
    when their tenants already hold every one (returns None)."""
    keys = [document_key(d.user_id, d.document_id) for d in documents]
    if reuse and client.stored_documents(keys) == len(keys):
        out(f"reusing {label}: it holds all {len(keys)} documents")
        return None
    started = time.monotonic()
    accepted = client.ingest(documents)
    refs = [(key, accepted.version) for key in keys]
    interactive = sys.stderr.isatty()
    last = -1
    progress = LoadProgress(refs)
    while True:
        states = progress.poll(client)
        finished = progress.finished
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
        time.sleep(progress.pause())
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


def run(path: Path, reuse: bool, out: Say) -> Report:
    """One set: a LoCoMo JSON file (or a folder holding one), else a BEIR folder."""
    client = EngramClient()
    try:
        conversation_file = locomo_file(path)
        if conversation_file is not None:
            return _run_locomo(client, load_locomo(conversation_file), reuse, out)
        dataset = load_beir(path)
        documents = dataset.documents(tenant_of(dataset))
        took = ingest(client, documents, f"tenant {tenant_of(dataset)!r}", reuse, out)
        return _measure_beir(client, dataset, took)
    finally:
        client.close()


Searches = dict[str, dict[str, list[str]]]
"""method → query id → the documents found, best first."""


def search_all(
    client: EngramClient, queries: Sequence[tuple[str, str, str]], top_k: int, report: Report
) -> Searches:
    """Every (query id, tenant, text) searched by every method, the methods in turn for each
    query, so that each method's latency is measured under the same load."""
    found: Searches = {m: {} for m in (*METHODS, *ABLATION)}
    for method in found:
        report.latencies[method] = []
    for query_id, tenant, text in queries:
        for method, results in found.items():
            request = SearchRequest(query=text, user_id=tenant, top_k=top_k, method=method)
            results[query_id], waited = ranked_documents(client, request)
            report.latencies[method].append(waited)
    report.latencies_default = {method: [] for method in found}
    for _, tenant, text in queries[:LATENCY_QUERIES]:
        for method, waits in report.latencies_default.items():
            request = SearchRequest(query=text, user_id=tenant, top_k=DEFAULT_TOP_K, method=method)
            waits.append(ranked_documents(client, request)[1])
    return found


def _measure_beir(client: EngramClient, dataset: BeirSet, ingest_s: float | None) -> Report:
    tenant = tenant_of(dataset)
    report = Report(dataset.name, "beir", len(dataset.corpus), len(dataset.queries), ingest_s)
    queries = [(query_id, tenant, text) for query_id, text in dataset.queries.items()]
    for method, results in search_all(client, queries, TOP_K, report).items():
        report.methods[method] = beir(results, dataset.qrels)
    return report


def _run_locomo(client: EngramClient, dataset: LocomoSet, reuse: bool, out: Say) -> Report:
    documents = [d for c in dataset.conversations for d in c.documents(dataset.tenant(c))]
    took = ingest(client, documents, f"{len(dataset.conversations)} conversation tenants", reuse, out)
    report = Report(dataset.name, "locomo", len(documents), dataset.questions, took)
    questions = [q for c in dataset.conversations for q in c.questions]
    queries = [(q.id, dataset.tenant(c), q.text) for c in dataset.conversations for q in c.questions]
    for method, runs in search_all(client, queries, CONVERSATION_TOP_K, report).items():
        report.methods[method] = recall_report(runs, questions)
    return report


def sets_under(folder: Path) -> list[Path]:
    """The sets in a folder, by name: BEIR folders, LoCoMo JSON files and folders holding one."""
    if not folder.is_dir():
        raise InvalidInput(f"{folder}: not a folder")
    found = [
        entry
        for entry in sorted(folder.iterdir())
        if (entry.is_dir() and (entry / "corpus.jsonl").is_file()) or locomo_file(entry) is not None
    ]
    if not found:
        raise InvalidInput(f"{folder}: no BEIR folder or LoCoMo JSON file in it")
    return found


@dataclass
class Suite:
    reports: list[Report]

    def latency_ms(self, default_top_k: bool = False) -> dict[str, dict[str, float]]:
        """Each method's latency over every search of the suite (at the default top_k: of the
        latency pass)."""
        return {
            m: latency_summary(
                [
                    ms
                    for r in self.reports
                    for ms in (r.latencies_default if default_top_k else r.latencies).get(m, [])
                ]
            )
            for m in (*METHODS, *ABLATION)
        }

    def as_json(self) -> dict[str, Any]:
        return {
            "sets": {r.dataset: r.as_json() for r in self.reports},
            "latency_ms": self.latency_ms(),
            f"latency_top{DEFAULT_TOP_K}_ms": self.latency_ms(default_top_k=True),
            "table": {
                m: {r.dataset: round(r.methods[m][r.headline], 4) for r in self.reports}
                for m in (*METHODS, *ABLATION)
            },
        }

    def table(self) -> str:
        heads = [f"{r.dataset} {'nDCG@10' if r.kind == 'beir' else 'R@10'}" for r in self.reports]
        width = max([12, *(len(h) for h in heads)])
        lines = [
            f"{'method':<40}"
            + "".join(f" {h:>{width}}" for h in heads)
            + f" {'p50 ms':>8} {'p95 ms':>8} {f'p50@{DEFAULT_TOP_K}':>8} {f'p95@{DEFAULT_TOP_K}':>8}"
        ]
        latency, default = self.latency_ms(), self.latency_ms(default_top_k=True)
        for method in (*METHODS[:3], *ABLATION, METHODS[3]):
            lines.append(
                f"{LABELS[method]:<40}"
                + "".join(f" {r.methods[method][r.headline]:>{width}.3f}" for r in self.reports)
                + f" {latency[method]['p50']:>8.1f} {latency[method]['p95']:>8.1f}"
                + f" {default[method]['p50']:>8.1f} {default[method]['p95']:>8.1f}"
            )
        lines += [
            "",
            "latency: every search of the suite through the query queue, per method, at each set's "
            f"top_k (100 BEIR, 20 LoCoMo), then at top_k {DEFAULT_TOP_K} "
            f"(first {LATENCY_QUERIES} queries of each set)",
        ]
        return "\n".join(lines)


def run_suite(folder: Path, reuse: bool, out: Say) -> Suite:
    reports = []
    for path in sets_under(folder):
        out(f"== {path.name}")
        report = run(path, reuse, out)
        out(report.table())
        out("")
        reports.append(report)
    return Suite(reports)


def main(path: Path, reuse: bool, as_json: bool, suite: bool = False) -> int:
    def say(line: str) -> None:
        print(line, file=sys.stderr if as_json else sys.stdout, flush=True)

    if suite:
        measured = run_suite(path, reuse, say)
        print(json.dumps(measured.as_json()) if as_json else measured.table())
        return 0
    report = run(path, reuse, say)
    print(json.dumps(report.as_json()) if as_json else report.table())
    return 0


def register(commands: Any) -> None:
    evaluation = commands.add_parser(
        "eval", help="ingest a BEIR or LoCoMo set through the pipeline and measure search on it"
    )
    evaluation.add_argument(
        "dataset", type=Path, nargs="?", metavar="DATASET", help="a BEIR folder or a LoCoMo JSON file"
    )
    evaluation.add_argument(
        "--suite", type=Path, metavar="DIR", help="every set under DIR: one table, methods x sets"
    )
    evaluation.add_argument(
        "--reuse", action="store_true", help="skip the ingest when the set's tenant already holds it"
    )
    evaluation.add_argument("--json", action="store_true", help="print one JSON object")
    evaluation.set_defaults(run=_eval)


def _eval(args: argparse.Namespace) -> int:
    if (args.dataset is None) == (args.suite is None):
        raise InvalidInput("engram eval takes one DATASET or --suite DIR")
    if args.suite is not None:
        return main(args.suite, args.reuse, args.json, suite=True)
    return main(args.dataset, args.reuse, args.json)
