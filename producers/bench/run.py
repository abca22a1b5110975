"""``engram bench``: the arguments, and the phases in order (each measured by a module of its own).

Progress and the estimate go to stderr, the table to stdout, every figure to ``--json``.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from producers.bench import (
    corpus,
    estimate,
    fallback,
    ingest,
    instant,
    latency,
    recall,
    repair,
    report,
    searchable,
    throughput,
)
from producers.bench import tenants as tenant_phase
from producers.bench.processes import rss_by_process
from producers.bench.stack import DEFAULT_PORTS, ROOT, OwnStack, Ports, Stack
from producers.client import EngramClient
from shared.container import Container
from shared.errors import EngramError
from shared.models import DocumentIn, utc_now
from shared.settings import get_settings
from workers.app import make_app

PHASES = ("throughput", "write_to_searchable", "tenants", "recall", "reconcile", "fallback", "rss", "instant")
WARMUP_DOCUMENTS = 256
"""Two ingest tasks' worth (a tenant of its own, named with the run's prefix, so a clean-up by
prefix takes it too); never more than the first size."""
SHARES = {"1%": "p1", "10%": "p10", "50%": "p50"}


def register(commands: Any) -> None:
    bench = commands.add_parser(
        "bench",
        help="measure ingestion, search, tenants, recall, reconcile and fallback on real text",
        description="Builds corpora of Debian package descriptions and the kit's sets, starts a "
        "stack of its own (or uses the running one with --running) and prints the figures, each "
        "against its target.",
    )
    bench.add_argument("--sizes", default="10000,100000", help="store sizes, comma-separated")
    bench.add_argument("--json", type=Path, help="write every figure here as one object")
    bench.add_argument("--png", type=Path, help="latency against size (default: beside --json)")
    bench.add_argument("--running", action="store_true", help="the running stack (ENGRAM_* settings)")
    bench.add_argument("--url", help="with --running: its HTTP app (default: ENGRAM_API_PORT on loopback)")
    bench.add_argument("--api-key", help="with --running: an admin key (default: one made and revoked)")
    bench.add_argument(
        "--ports", type=Ports.parse, default=Ports(*DEFAULT_PORTS), help='own stack: "redis neo4j api"'
    )
    bench.add_argument("--data-dir", type=Path, default=ROOT / ".engram-bench" / "stack")
    bench.add_argument("--searches", type=int, default=200, help="timed searches per kind and size")
    bench.add_argument("--throughput-seconds", type=float, default=10.0)
    bench.add_argument("--skip", default="", help=f"phases to leave out: {','.join(PHASES)}")
    bench.add_argument("--keep", action="store_true", help="leave the bench's own stack running")
    bench.add_argument("--timeout", type=float, default=6 * 3600.0, help="seconds for one ingestion")
    bench.set_defaults(run=run)


def say(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


def _tenant(prefix: str, index: int) -> str:
    """A document's tenant by its place in the corpus: 1% p1, 10% p10, 50% p50, the rest rest."""
    slot = index % 100
    share = "p1" if slot == 0 else "p10" if slot <= 10 else "p50" if slot <= 60 else "rest"
    return f"{prefix}-{share}"


def _documents(texts: list[corpus.Text], start: int, prefix: str) -> list[DocumentIn]:
    return [
        DocumentIn(
            user_id=_tenant(prefix, i),
            id=f"{i:07d}-{texts[i].id}"[:200],
            text=texts[i].text,
            title=texts[i].title[:200],
            source=texts[i].source,
        )
        for i in range(start, len(texts))
    ]


def _cpu_ratio(steps: list[dict[str, Any]]) -> float | None:
    """Chunks per CPU-second of the stack against the raw embedder's, over every size."""
    stack_cpu = float(sum(sum(s["cpu_s"].values()) for s in steps))
    raw_cpu = float(sum(s["raw"].get("cpu_s", 0.0) for s in steps))
    if not stack_cpu or not raw_cpu:
        return None
    chunks, raw_chunks = sum(s["chunks"] for s in steps), sum(s["raw"]["chunks"] for s in steps)
    return float(chunks / stack_cpu) / float(raw_chunks / raw_cpu)


def _interrupted(signum: int, _: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def skipped(asked: set[str], own: bool) -> set[str]:
    """The phases left out: those asked, and on a stack not the bench's own the fallback (it stops
    Neo4j for real) and the instant embedder (it restarts the workers). (A --skip fallback on its
    own stack was overruled.)"""
    return asked if own else {*asked, "fallback", "instant"}


def _stack_cpu(steps: list[dict[str, Any]]) -> dict[str, float | None]:
    """CPU-ms a chunk over every size: the raw embedder's, and the stack's outside the model (all
    the stack's CPU less the raw embedder's for as many chunks); and where the embed workers
    counted it, the model's own in the pipeline and all the stack's CPU less that."""
    chunks = sum(s["chunks"] for s in steps)
    raw_ms = 1000 * sum(s["raw"]["cpu_s"] for s in steps) / sum(s["raw"]["chunks"] for s in steps)
    model_ms = sum(s["chunks"] * s["raw_cpu_ms_per_chunk"] for s in steps)
    stack_ms = 1000 * sum(sum(s["cpu_s"].values()) for s in steps)
    found: dict[str, float | None] = {
        "raw_cpu_ms_per_chunk": round(raw_ms, 2),
        "stack_cpu_ms_per_chunk": round((stack_ms - model_ms) / chunks, 2) if chunks else None,
    }
    if chunks and all(s.get("model_cpu_ms_per_chunk") for s in steps):
        counted = sum(s["chunks"] * s["model_cpu_ms_per_chunk"] for s in steps)
        found["model_cpu_ms_per_chunk"] = round(counted / chunks, 2)
        found["outside_model_cpu_ms_per_chunk"] = round((stack_ms - counted) / chunks, 2)
    return found


def run(args: argparse.Namespace) -> int:
    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if not sizes or sizes[0] < 10 or not skip <= set(PHASES):
        print(
            f"engram bench: sizes of 10 and more; --skip names some of {', '.join(PHASES)}", file=sys.stderr
        )
        return 2
    own = not args.running
    skip = skipped(skip, own)
    plan = estimate.phases(sizes, args.searches, args.throughput_seconds, skip, own)
    for line in estimate.say_plan(plan, os.getloadavg()[0], os.cpu_count() or 1):
        say(line)
    texts = corpus.corpus(sizes[-1], say)
    queries: Iterator[str] = iter(corpus.queries(say))
    say(f"corpus: {len(texts):,} texts ({', '.join(sorted({t.source for t in texts}))})")
    stack = OwnStack(args.data_dir, args.ports, say) if own else Stack(get_settings(), args.url)
    # Stopped by SIGTERM, or SIGINT even when started in the background (where it is ignored),
    # the bench still tears its stack down on the way out.
    signal.signal(signal.SIGTERM, _interrupted)
    signal.signal(signal.SIGINT, _interrupted)
    try:
        stack.open()
        result = _measure(args, stack, sizes, skip, texts, queries)
    finally:
        if own and not args.keep:
            stack.close()
    report.print_table(result, sys.stdout)
    if args.json:
        report.write_json(result, args.json)
        say(f"wrote {args.json}")
    png = args.png or (args.json.with_suffix(".png") if args.json else ROOT / ".engram-bench" / "latency.png")
    if report.plot(result, png):
        say(f"wrote {png}")
    else:
        say("no PNG: matplotlib is not installed (pip install -e '.[bench]')")
    return 0


def _instant(
    args: argparse.Namespace,
    stack: Stack,
    client: EngramClient,
    container: Container,
    texts: list[corpus.Text],
    prefix: str,
    result: dict[str, Any],
    skip: set[str],
) -> None:
    documents = [d.model_copy(update={"user_id": f"{prefix}-instant"}) for d in _documents(texts, 0, prefix)]
    # The workers go back to the configured embedder for the fallback, which embeds its queries
    # (on the stopped stub they failed the whole bench), and for a stack kept; else the stack is
    # torn down next.
    put_back = args.keep or "fallback" not in skip

    def restart(extra: dict[str, str]) -> None:
        if extra or put_back:
            stack.restart_services(extra)

    try:
        measured = instant.measure(
            client,
            stack.settings.data_dir,
            documents,
            container.embedder.dimension,
            restart,
            say,
            args.timeout,
        )
    except (RuntimeError, EngramError) as exc:  # the other figures stand; the table says why
        result["instant_error"] = str(exc)[-500:]
        say(f"instant embedder: not measured: {exc}")
        return
    result["ingest"]["instant"] = measured
    result["ingest"]["instant_embedder_chunks_per_s"] = measured["chunks_per_s"]


def _keep(args: argparse.Namespace, result: dict[str, Any]) -> None:
    """What is measured so far, written at once: a run stopped midway leaves its figures."""
    if args.json:
        report.write_json({**result, "partial": True}, args.json)


def _measure(
    args: argparse.Namespace,
    stack: Stack,
    sizes: list[int],
    skip: set[str],
    texts: list[corpus.Text],
    queries: Iterator[str],
) -> dict[str, Any]:
    settings = stack.settings
    client = EngramClient(settings, app=make_app(settings))
    container = Container(settings)
    made_key = None
    if args.api_key:
        key = args.api_key
    else:
        made_key = client.create_key("engram-bench", None)
        key = made_key.key
    headers = {"Authorization": f"Bearer {key}"}
    http = httpx.Client(base_url=stack.api_url, headers=headers, timeout=60)
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    result: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}",
        "backend": "qdrant server" if settings.qdrant_url else "qdrant embedded",
        "tenant_prefix": prefix,
        "sizes": sizes,
        "search": {},
    }
    try:
        # Workers load their model, Neo4j builds its indexes and compiles its write path on the
        # first batches: not measured. (Eight documents warmed the workers but not Neo4j's JIT:
        # its write path then cost ~57 CPU-ms a chunk against ~7-12 once warm, most of Neo4j's
        # share of a 2,000-document ingestion.)
        warm = texts[: min(WARMUP_DOCUMENTS, sizes[0])]
        say(f"warm-up: {len(warm)} documents through every stage (model loads, schema, JIT), not measured")
        warmup = [d.model_copy(update={"user_id": f"{prefix}-warmup"}) for d in _documents(warm, 0, prefix)]
        ingest.load(client, warmup, say, args.timeout)
        latency.warm(client, http, f"{prefix}-warmup", queries)
        steps: list[dict[str, Any]] = []
        previous = 0
        for size in sizes:
            say(f"size {size:,}: ingesting {size - previous:,} documents through the queues")
            documents = _documents(texts[:size], previous, prefix)
            step = ingest.measure(client, container, settings.data_dir, documents, say, args.timeout)
            steps.append({"size": size, **step})
            say(f"size {size:,}: ingest ratio {step['ratio']:.2f}; searching ({args.searches} a kind)")
            result["search"][str(size)] = latency.measure(
                container, client, http, f"{prefix}-p50", queries, args.searches
            )
            previous = size
            _keep(args, {**result, "ingest_steps": steps})
        chunks = sum(s["chunks"] for s in steps)
        seconds = sum(s["seconds"] for s in steps)
        raw = sum(s["raw"]["chunks"] for s in steps) / sum(s["raw"]["seconds"] for s in steps)
        result["ingest"] = {
            "chunks": chunks,
            "seconds": seconds,
            "chunks_per_s": chunks / seconds,
            "raw_chunks_per_s": raw,
            "ratio": chunks / seconds / raw,
            "cpu_ratio": _cpu_ratio(steps),
            **_stack_cpu(steps),
            "steps": steps,
        }
        if "throughput" not in skip:
            say("throughput: 1, 8 and 32 clients")
            result["throughput"] = throughput.measure(
                stack.api_url, headers, f"{prefix}-p50", queries, args.throughput_seconds, settings.data_dir
            )
        _keep(args, result)
        if "write_to_searchable" not in skip:
            say(f"write -> searchable: {searchable.ROUNDS} webhook posts, each searched for until found")
            result["write_to_searchable"] = searchable.measure(http, f"{prefix}-w2s", queries)
        _keep(args, result)
        if "tenants" not in skip:
            say("tenants: 1%, 10% and 50% of the store")
            held = {
                label: (f"{prefix}-{share}", client.tenant_overview(f"{prefix}-{share}").memories)
                for label, share in SHARES.items()
            }
            result["tenants"] = tenant_phase.measure(client, held, queries, args.searches)
        _keep(args, result)
        if "recall" not in skip:
            say("recall@10 of the vector index against exact search")
            result["recall"] = recall.measure(container, queries, min(args.searches, 200))
        _keep(args, result)
        if "reconcile" not in skip:
            say("reconcile: a dry-run scan, then failed syncs repaired")
            result["reconcile"] = {
                "scan": repair.scan(client),
                "repair": repair.repair(client, container, prefix),
            }
        _keep(args, result)
        if "rss" not in skip:
            result["rss"] = rss_by_process(settings.data_dir)
        _keep(args, result)
        if "instant" not in skip:
            # After the searches: its tenant's fixed vectors would sit in the index they walk. Before
            # the fallback, which restarts Neo4j: met cold again (its JIT, its page cache), Neo4j
            # cost the stub's run 9.0 CPU-ms a chunk against 3.9 warm (139 against 219 chunks/s, 10k).
            say("instant embedder: the pipeline once more, the embed stage on a stub answering at once")
            _instant(args, stack, client, container, texts[: sizes[0]], prefix, result, skip)
        _keep(args, result)
        if "fallback" not in skip:
            say("fallback: Neo4j stopped for real")
            try:
                result["fallback"] = fallback.measure(
                    stack, client, f"{prefix}-p50", queries, args.searches, say
                )
            except (RuntimeError, EngramError) as exc:  # the other figures stand; the table says why
                result["fallback_error"] = str(exc)[-500:]
                say(f"fallback: not measured: {exc}")
    finally:
        http.close()
        if made_key is not None:
            try:
                client.key_store().revoke_key(made_key.info.id, utc_now())
            except Exception as exc:  # the figures matter more than the clean-up
                say(f"could not revoke the bench's key {made_key.info.id}: {exc}")
        client.close()
        container.close()
    result["targets"] = [t.as_dict() for t in report.targets(result)]
    return result
