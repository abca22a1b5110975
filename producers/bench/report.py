"""The bench's one result: the table (stdout), the targets PASS/MISS, the JSON and the PNG.

Targets are judged at the largest size measured; where the issue names a size (100k) and the run
stopped short of it, the row says at which size it was judged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from producers.bench.stats import percentile

TARGET_SIZE = 100_000
INGEST_RATIO = 0.8
"""Target 1's ingestion against the raw embedder: judged, and turned into the stack's CPU it allows."""
FIRST_ROUNDS = 3
"""Rounds of write -> searchable shown one by one before the p95 of the rest."""


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    measured: float | None
    bound: float
    at_most: bool  # measured <= bound passes (else measured >= bound)
    strict: bool = False
    note: str = ""

    @property
    def verdict(self) -> str:
        if self.measured is None:
            return "NOT MEASURED"
        if self.at_most:
            ok = self.measured < self.bound if self.strict else self.measured <= self.bound
        else:
            ok = self.measured >= self.bound
        return "PASS" if ok else "MISS"

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.name,
            "measured": self.measured,
            "bound": self.bound,
            "verdict": self.verdict,
            "note": self.note,
        }


def targets(result: dict[str, Any]) -> list[Target]:
    search: dict[str, dict[str, Any]] = result["search"]
    sizes = sorted(int(s) for s in search)
    top, first = str(sizes[-1]), str(sizes[0])
    at = "" if int(top) >= TARGET_SIZE else f"judged at {int(top):,}, the target is at 100k"
    s = search[top]
    growth = s["p50_ms"] / search[first]["p50_ms"] if len(sizes) > 1 else None
    tenants = result.get("tenants")
    recall = result.get("recall")
    reconcile = result.get("reconcile")
    fallback = result.get("fallback")
    searchable = result.get("write_to_searchable")
    ingest = result["ingest"]
    floor = s["floor_p50_ms"]
    worst_tenant = None if tenants is None else max(t["p50_ms"] for t in tenants.values()) / floor
    eight = next((level for level in result.get("throughput") or [] if level["clients"] == 8), None)
    return [
        Target("ingestion / raw embedder", ingest["ratio"], INGEST_RATIO, at_most=False),
        Target(
            "stack CPU-ms a chunk outside the model", ingest.get("stack_cpu_ms_per_chunk"), 4.0, at_most=True
        ),
        Target(
            "instant embedder chunks/s",
            ingest.get("instant_embedder_chunks_per_s"),
            400.0,
            at_most=False,
            note=str(result.get("instant_error", ""))[:90],
        ),
        Target("default p50 / floor", s["ratio_p50"], 2.0, at_most=True, note=at),
        Target("default p99 ms", s["p99_ms"], 100.0, at_most=True, strict=True, note=at),
        Target("vector p50 / floor", s["vector_ratio_p50"], 1.5, at_most=True, note=at),
        Target(
            "default p50 growth first->last size",
            growth,
            1.3,
            at_most=True,
            note=f"{int(first):,} -> {int(top):,}" if growth is not None else "one size only",
        ),
        Target(
            "tenants' top_k complete (1 = all)",
            None if tenants is None else float(all(t["complete"] for t in tenants.values())),
            1.0,
            at_most=False,
        ),
        Target("tenants' p50 / floor, the slowest", worst_tenant, 2.0, at_most=True, note=at),
        Target(
            "HTTP searches/s, 8 clients",
            None if eight is None else eight["per_s"],
            50.0,
            at_most=False,
            note="" if eight is None else f"{eight['failed']} failed",
        ),
        Target(
            "HTTP p99 ms, 8 clients",
            None if eight is None else eight["latency"]["p99_ms"],
            300.0,
            at_most=True,
            strict=True,
        ),
        Target(
            "recall@10 at the search's k",
            None if recall is None else recall["recall_at_10"],
            0.98,
            at_most=False,
        ),
        Target(
            "repair of failed syncs, s",
            None if reconcile is None else reconcile["repair"]["seconds"],
            10.0,
            at_most=True,
            note="" if reconcile is None else f"{reconcile['repair']['failed']:,} failed syncs",
        ),
        Target(
            "write -> searchable p95 ms",
            None if searchable is None else searchable["p95_ms"],
            150.0,
            at_most=True,
            note=at,
        ),
        Target(
            "reconcile scan, s",
            None if reconcile is None else reconcile["scan"]["seconds"],
            30.0,
            at_most=True,
            note=at,
        ),
        Target(
            "fallback p50 ms, Neo4j down",
            None if fallback is None else fallback["p50_ms"],
            100.0,
            at_most=True,
            strict=True,
            note="" if fallback else str(result.get("fallback_error", "needs the bench's own stack"))[:90],
        ),
    ]


def print_table(result: dict[str, Any], out: TextIO) -> None:
    ingest = result["ingest"]
    w = out.write
    w(
        f"engram bench: sizes {', '.join(f'{int(s):,}' for s in result['search'])}; "
        f"backup store {result['backend']}; {result['machine']}\n\n"
    )
    w(
        f"ingestion: {ingest['chunks']:,} chunks at {ingest['chunks_per_s']:.1f}/s; raw embedder "
        f"{ingest['raw_chunks_per_s']:.1f}/s on the same chunks; ratio {ingest['ratio']:.2f}"
        + (f" (by CPU {ingest['cpu_ratio']:.2f})" if ingest.get("cpu_ratio") else "")
        + "\n"
    )
    if ingest.get("stack_cpu_ms_per_chunk") is not None:  # absent from runs before it was measured
        allowed = ingest["raw_cpu_ms_per_chunk"] * (1 / INGEST_RATIO - 1)
        w(
            f"  CPU a chunk: the stack outside the model {ingest['stack_cpu_ms_per_chunk']:.1f} ms, "
            f"the raw embedder {ingest['raw_cpu_ms_per_chunk']:.1f} ms; with every core busy the ratio "
            f"is at most raw / (raw + outside) = {ratio_ceiling(ingest):.2f}, and {INGEST_RATIO} leaves the "
            f"stack {allowed:.1f} ms a chunk outside the model\n"
        )
    if ingest.get("model_cpu_ms_per_chunk") is not None:
        w(
            f"  the model in the pipeline {ingest['model_cpu_ms_per_chunk']:.1f} CPU-ms a chunk (as the "
            f"embed workers counted it), the stack around it {ingest['outside_model_cpu_ms_per_chunk']:.1f}\n"
        )
    if ingest.get("instant"):
        i = ingest["instant"]
        cpu = ", ".join(f"{role} {s / i['chunks'] * 1000:.1f}" for role, s in i["cpu_s"].items() if s >= 0.05)
        w(
            f"  instant embedder (a stub TEI server): {i['chunks']:,} chunks at {i['chunks_per_s']:.1f}/s, "
            f"the stack {i['stack_cpu_ms_per_chunk']:.1f} CPU-ms a chunk ({cpu})\n"
        )
    for step in ingest["steps"]:
        cpu = ", ".join(
            f"{role} {s:.0f}s ({step['cpu_share_of_wall'][role]:.0%})"
            for role, s in step["cpu_s"].items()
            if s >= 0.5
        )
        whole = step["raw"].get("one_call_chunks_per_s")  # absent from runs before it was measured
        one_call = f" ({whole:.1f}/s in one call)" if whole else ""
        w(
            f"  to {step['size']:,}: {step['chunks']:,} chunks in {step['seconds']:.1f} s "
            f"({step['chunks_per_s']:.1f}/s, {step['failed_documents']} documents failed, "
            f"raw {step['raw']['chunks_per_s']:.1f}/s{one_call}, "
            f"ratio {step['ratio']:.2f}); CPU-s (share of wall): {cpu}\n"
        )
        if step.get("cpu_ratio"):  # absent from runs before it was measured
            outside = step.get("stack_cpu_ms_per_chunk")
            w(
                f"    CPU: the stack {step['cpu_ms_per_chunk']:.0f} ms a chunk"
                + (f" ({outside:.1f} outside the model)" if outside is not None else "")
                + f", the raw embedder {step['raw_cpu_ms_per_chunk']:.1f}; "
                f"ratio by CPU {step['cpu_ratio']:.2f}"
                + (f"; the bench's wait {step['waiter_cpu_s']:.1f} CPU-s" if "waiter_cpu_s" in step else "")
                + "\n"
            )
    w("\nqueued search, ms (p50 / p95 / p99); ratio = p50 / floor p50\n")
    w(
        f"  {'size':>8}  {'floor':>17}  {'client default':>20}  {'client vector':>20}  "
        f"{'http default':>20}  {'http vector':>20}\n"
    )
    for size, s in result["search"].items():
        default = {"p50_ms": s["p50_ms"], "p95_ms": s["p95_ms"], "p99_ms": s["p99_ms"]}
        cells = [_cell(d, s["floor_p50_ms"]) for d in (default, s["vector"], s["http"], s["http_vector"])]
        floor = f"{s['floor']['p50_ms']:.0f}/{s['floor']['p95_ms']:.0f}/{s['floor']['p99_ms']:.0f}"
        w(f"  {int(size):>8,}  {floor:>17}  " + "  ".join(f"{c:>20}" for c in cells) + "\n")
    for size, s in result["search"].items():
        if "parts" in s:  # absent from runs before it was measured
            w(parts_line(int(size), s))
    if result.get("throughput"):
        w("\nthroughput through HTTP (default search):\n")
        for level in result["throughput"]:
            lat = level["latency"] or {}
            w(
                f"  {level['clients']:>2} clients: {level['per_s']:.1f} searches/s, p50 "
                f"{lat.get('p50_ms', float('nan')):.0f} ms, p99 {lat.get('p99_ms', float('nan')):.0f} ms, "
                f"failed {level['failed']}\n"
            )
            if level.get("cpu_ms_per_search"):
                w(f"             CPU a search {cpu_split(level)}\n")
    if result.get("write_to_searchable"):
        w(f"\n{searchable_line(result['write_to_searchable'])}\n")
    if result.get("tenants"):
        w("\ntenants in the same store (top_k 10, threshold -1):\n")
        for label, t in result["tenants"].items():
            w(
                f"  {label:>4}: {t['memories']:,} memories; {t['n'] - t['incomplete']}/{t['n']} complete; "
                f"p50 {t['p50_ms']:.0f} ms, p99 {t['p99_ms']:.0f} ms\n"
            )
    if result.get("recall"):
        r = result["recall"]
        w(
            f"\nrecall@10 of the vector index against exact: {r['recall_at_10']:.3f} at the search's "
            f"k={r.get('k', 10)}, {r.get('index_k10_recall_at_10', r['recall_at_10']):.3f} at k=10 "
            f"({r['queries']} queries over {r['memories']:,} memories)\n"
        )
        if r.get("by_k"):
            w("  by the k asked: " + ", ".join(f"k={k} {v:.3f}" for k, v in r["by_k"].items()) + "\n")
    if result.get("reconcile"):
        r = result["reconcile"]
        w(
            f"reconcile: scan (dry run) {r['scan']['seconds']:.1f} s; {r['repair']['failed']:,} failed syncs "
            f"repaired in {r['repair']['seconds']:.1f} s ({r['repair']['left_unsynced']} left unsynced)\n"
        )
    if result.get("fallback"):
        f = result["fallback"]
        w(
            f"fallback, Neo4j stopped: first search {f['first_search_ms']:.0f} ms; "
            f"then p50 {f['p50_ms']:.0f} ms, "
            f"p99 {f['p99_ms']:.0f} ms; {f['answered_from_backup']}/{f['n']} answered from the backup\n"
        )
    if result.get("rss"):
        w("\nRSS per process, MiB:\n")
        for p in result["rss"]:
            w(f"  {p['role']:<34} pid {p['pid']:<8} {p['rss_mib']:>8.1f}\n")
    w("\ntargets:\n")
    for t in result["targets"]:
        measured = "-" if t["measured"] is None else f"{t['measured']:.3g}"
        note = f"  ({t['note']})" if t["note"] else ""
        w(f"  {t['verdict']:<12} {t['target']:<38} {measured:>8}  bound {t['bound']:g}{note}\n")


def searchable_line(v: dict[str, Any]) -> str:
    """The write -> searchable phase: its percentiles over every round (the target's), and, where
    the run kept them, its first rounds in order beside the p95 of the rest: 20 rounds' p95 is their
    second slowest, and at 100k the first two were (1.1 s and 0.23 s against 38-95 ms writes after)."""
    line = (
        f"write -> searchable (a webhook post until a search finds it, {v['n']} in a row): "
        f"p50 {v['p50_ms']:.0f} ms, p95 {v['p95_ms']:.0f} ms, max {v['max_ms']:.0f} ms "
        f"({v['searches']} searches)"
    )
    rounds = v.get("rounds_ms") or []
    if len(rounds) > FIRST_ROUNDS:
        rest = rounds[FIRST_ROUNDS:]
        first = ", ".join(f"{ms:.0f}" for ms in rounds[:FIRST_ROUNDS])
        line += (
            f"\n  first rounds {first} ms; p95 of the {len(rest)} after the first {FIRST_ROUNDS} "
            f"{percentile(rest, 0.95):.0f} ms"
        )
    return line


def ratio_ceiling(ingest: dict[str, Any]) -> float:
    """The ingestion ratio the stack's CPU allows when it keeps every core busy: the raw embedder's
    CPU a chunk over the stack's (the model plus what the stack spends outside it)."""
    raw = float(ingest["raw_cpu_ms_per_chunk"])
    return raw / (raw + float(ingest["stack_cpu_ms_per_chunk"]))


def parts_line(size: int, s: dict[str, Any]) -> str:
    """Where a queued vector search's p50 goes over the floor, and what a hop costs this machine."""
    parts, floor, vector = s["parts"], s["floor_p50_ms"], s["vector"]["p50_ms"]
    index, here, wake = parts["index_read"]["p50_ms"], parts["searched_here"]["p50_ms"], parts["wake_up"]
    idle = f"{wake['idle_ms']:.0f} ms " if "idle_ms" in wake else ""  # bench-100k-parts did not say it
    return (
        f"  {size:>8,}: client vector {vector:.1f} = floor {floor:.1f}"
        f" {index - floor:+.1f} the index at the search's k and tenant"
        f" {here - index:+.1f} the searcher around it {vector - here:+.1f} the queue;"
        f" a hop after {idle}idle (hot): Redis {wake['redis_idle_ms']:.2f}"
        f" ({wake['redis_hot_ms']:.2f}), Neo4j {wake['neo4j_idle_ms']:.2f} ({wake['neo4j_hot_ms']:.2f}) ms\n"
    )


def _cell(d: dict[str, Any], floor_p50: float) -> str:
    return f"{d['p50_ms']:.0f}/{d['p95_ms']:.0f}/{d['p99_ms']:.0f} x{d['p50_ms'] / floor_p50:.2f}"


def write_json(result: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")


def plot(result: dict[str, Any], path: Path) -> bool:
    """Latency against size; False when matplotlib is not installed (pip install engram[bench])."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    sizes = [int(s) for s in result["search"]]
    rows = list(result["search"].values())
    figure, axes = plt.subplots(figsize=(7, 4.5))
    series = {
        "floor p50": [r["floor_p50_ms"] for r in rows],
        "default p50": [r["p50_ms"] for r in rows],
        "default p99": [r["p99_ms"] for r in rows],
        "vector p50": [r["vector"]["p50_ms"] for r in rows],
        "http default p50": [r["http"]["p50_ms"] for r in rows],
    }
    for label, values in series.items():
        axes.plot(sizes, values, marker="o", label=label)
    axes.axhline(100, color="grey", linestyle=":", label="p99 target (100 ms)")
    axes.set_xscale("log")
    axes.set_xlabel("memories in the store")
    axes.set_ylabel("ms")
    axes.set_title("engram bench: queued search latency against store size")
    axes.legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True


def cpu_split(level: dict[str, Any]) -> str:
    """``80 ms: worker query 34, neo4j 33, api 11, redis 2``: the roles, the largest first."""
    roles = sorted(level["cpu_ms_per_search"].items(), key=lambda item: -item[1])
    parts = ", ".join(f"{role} {ms:.0f}" for role, ms in roles if ms >= 0.5)
    return f"{level['stack_cpu_ms_per_search']:.0f} ms: {parts}"
