"""How long each phase should take at the sizes asked, said before anything starts.

The rates are this project's own figures on a 2-core machine (docs/bench/figures.md, 6 December
2026: bench-100k-int8 and bench-100k-parts), said a little slower than measured so a busier
machine is not promised more: the pipeline stored 187-251 chunks/s, the raw embedder's two passes
over 2,000 chunks took 9-10 s, the latency loop's kinds 20 ms a search on the whole, the
reconciler's scan and repair 16 s at 100k, the instant embedder's 5,000 chunks 73 s with the
workers' restarts, the fallback 25 s. The ingest estimate is said again with the rate measured
once the first size is in.
"""

from __future__ import annotations

from collections.abc import Sequence

from producers.bench.latency import KINDS

INGEST_PER_S = 150.0
RAW_PER_S = 200.0
SEARCH_S = 0.02
INSTANT_PER_S = 300.0
STACK_START_S = 60.0


def phases(
    sizes: Sequence[int],
    searches: int,
    throughput_s: float,
    skip: set[str],
    own_stack: bool,
) -> list[tuple[str, float]]:
    top = max(sizes)
    found: list[tuple[str, float]] = []
    if own_stack:
        found.append(("stack start (Redis, Neo4j, workers, app)", STACK_START_S))
    previous = 0
    for size in sizes:
        found.append(
            (f"ingest to {size:,} (+{size - previous:,} documents)", (size - previous) / INGEST_PER_S)
        )
        found.append((f"raw embedder at {size:,}", min(size - previous, 2000) / RAW_PER_S))
        found.append((f"search latency at {size:,}", len(KINDS) * searches * SEARCH_S))
        previous = size
    optional = {
        "throughput": ("throughput, 1/8/32 clients", 3 * throughput_s),
        "write_to_searchable": ("write -> searchable, 20 posts", 20 * 0.5),
        "tenants": ("tenants 1%/10%/50%", 3 * searches * SEARCH_S),
        "recall": ("recall@10 against exact", top / 5000 + searches * 0.03),
        "reconcile": ("reconcile scan and repair", top / 10_000 + min(top, 10_000) / 1000),
        "instant": ("instant embedder (workers restarted)", 60 + min(sizes[0], 5000) / INSTANT_PER_S),
        "fallback": ("fallback, Neo4j stopped and started", 40 + searches * SEARCH_S),
    }
    for name, (label, seconds) in optional.items():
        if name not in skip and (name not in ("fallback", "instant") or own_stack):
            found.append((label, seconds))
    return found


def say_plan(found: list[tuple[str, float]], load: float, cpus: int) -> list[str]:
    """The phases' estimates, stretched by how busy the machine is now (load average per core,
    when above one: the other work takes its share of the cores)."""
    slower = max(1.0, load / max(1, cpus))
    total = sum(seconds for _, seconds in found) * slower
    lines = [f"  {label:<45} ~{_duration(seconds * slower)}" for label, seconds in found]
    return [
        f"estimate (docs/bench/figures.md's rates on a quiet 2-core machine, x{slower:.1f} for the load "
        f"average {load:.1f} on {cpus} cores):",
        *lines,
        f"  {'total':<45} ~{_duration(total)}",
    ]


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"
