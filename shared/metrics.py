"""Engram's Prometheus metrics: what each process counts, and what ``/metrics`` reads when scraped.

Counted where it happens, in prometheus-client's multiprocess mode: Celery's prefork workers run
tasks in forked children and the app may run several uvicorn processes, so each process writes
its counters and histograms to memory-mapped files, and the app's ``/metrics`` merges the files
of every process (``exposition``). One scrape target serves it all.

- The folder: ``ENGRAM_METRICS_DIR`` (default ``data_dir/metrics``), a subfolder per host. The
  files are named by pid, and the containers of a compose project (which share the folder as a
  volume) each number their pids from 1; on one host pids are unique.
- Wiped when the whole stack starts (``ops/`` before supervisord starts; compose mounts a tmpfs
  volume), never when one worker starts: its counts would drop out of the sums, and Prometheus
  would read every summed series as a counter reset. A process that ends leaves its files, so its
  counts stay in the totals, as a counter's must.
- Read at scrape time from the stores, with a short cache (``ENGRAM_METRICS_CACHE_S``):
  queue depths, documents by state, vector_sync counts and the oldest pending's age, the
  reconciler's ``primary_lost`` (``StoreCollector``).

No label names a tenant, a document, a query or a raw path: every label value is one of a fixed
set (stage, outcome, queue, state, kind, method, source, the route's template, status code), so
the series stay few and nothing of a tenant's shows in them.
"""

from __future__ import annotations

import glob
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

from prometheus_client import CollectorRegistry, Counter, Histogram, values
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from shared.settings import EmbeddingBackend, Settings, get_settings
from shared.tasks import EMBED_TASK, RECONCILE_TASK, SEARCH_TASK, STAGES

log = logging.getLogger(__name__)


def process_dir(settings: Settings) -> Path:
    """This host's folder of multiprocess files."""
    return settings.metrics_path / socket.gethostname()


def enable_multiprocess(settings: Settings) -> Path | None:
    """Makes this process write its metric values to files (before any value exists: every
    metric here has labels, so a value is made at its first ``labels()``). A folder that cannot
    be made (a CLI run where the data folder is read-only) leaves them in memory, with a warning."""
    folder = process_dir(settings)
    try:
        private_folder(folder)
    except OSError as exc:
        log.warning("metrics stay in this process's memory: cannot make %s (%s)", folder, exc)
        return None
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(folder)
    values.ValueClass = values.MultiProcessValue()  # type: ignore[no-untyped-call]
    return folder


def private_folder(folder: Path) -> None:
    """Makes ``folder`` and whichever of its parents are missing, each readable by this user alone
    (``mkdir(parents=True)`` gives the parents the umask's mode: a bare import made a data folder of
    0755): metric files name tenants' routes and counts."""
    missing = [path for path in (folder, *folder.parents) if not path.exists()]
    for path in reversed(missing):
        path.mkdir(mode=0o700, exist_ok=True)


def disable_multiprocess() -> None:
    """For a process that counts nothing of ours and serves metrics of its own (Flower): its
    values stay in its memory, out of the files /metrics merges."""
    os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
    values.ValueClass = values.MutexValue


enable_multiprocess(get_settings())

# Counted by the Celery workers (workers/observe.py) ...

TASK_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
SEARCH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

TASKS = Counter("engram_tasks", "Tasks run, by stage and outcome.", ["stage", "outcome"])
TASK_SECONDS = Histogram(
    "engram_task_duration_seconds",
    "How long a task ran, by stage and outcome.",
    ["stage", "outcome"],
    buckets=TASK_BUCKETS,
)
SEARCH_SECONDS = Histogram(
    "engram_search_duration_seconds",
    "Searches answered by the query worker: time in the worker, by method and source (neo4j, qdrant).",
    ["method", "source"],
    buckets=SEARCH_BUCKETS,
)
EMBED_MODEL_CPU = Counter(
    "engram_embed_model_cpu_seconds",
    "CPU-seconds the embed stage's processes spent inside the embedder's calls, by backend: the model "
    "itself for the local one; the rest of the embed worker's CPU is the stage around it.",
    ["backend"],
)
RECONCILE_PASSES = Counter("engram_reconcile_passes", "Reconciler passes, by outcome.", ["outcome"])
DRIFT_FIXED = Counter(
    "engram_reconcile_drift_fixed",
    "Drift the reconciler repaired, by kind (missing_in_qdrant, stale_in_qdrant, orphan_points).",
    ["kind"],
)
RECONCILE_MEMORIES = Counter(
    "engram_reconcile_memories",
    "Memories the reconciler's passes re-synced, deleted from Qdrant, or left failed.",
    ["action"],
)
REDELIVERED = Counter(
    "engram_redelivered_messages",
    "Stage messages the broker lost, by what the reconciler did: sent again, or given up (documents failed).",
    ["outcome"],
)

# ... and by the HTTP app (producers/http/routes/metrics.py).

HTTP_REQUESTS = Counter(
    "engram_http_requests",
    "HTTP requests, by method, route template and status.",
    ["method", "route", "status"],
)
HTTP_SECONDS = Histogram(
    "engram_http_request_duration_seconds",
    "HTTP request time, by method and route template.",
    ["method", "route"],
)

DRIFT_KINDS = ("missing_in_qdrant", "stale_in_qdrant", "orphan_points")
OUTCOMES = frozenset({"success", "failure", "retry", "rejected", "ignored"})
METHODS = frozenset({"engram", "blend", "rrf", "weighted_rrf", "bm25", "vector"})
BACKENDS = frozenset(get_args(EmbeddingBackend))


def stage_of(task_name: str | None) -> str:
    return STAGES.get(task_name or "", "other")


def task_ended(task_name: str | None, state: str | None, seconds: float | None, retval: Any) -> None:
    """Counts a task that ended (Celery's ``task_postrun``): its stage and outcome, how long it
    ran, and what a search or a reconcile pass reports."""
    stage = stage_of(task_name)
    outcome = (state or "failure").lower()
    outcome = outcome if outcome in OUTCOMES else "other"
    TASKS.labels(stage, outcome).inc()
    if seconds is not None:
        TASK_SECONDS.labels(stage, outcome).observe(seconds)
    if outcome != "success" or not isinstance(retval, Mapping):
        if task_name == RECONCILE_TASK and outcome == "failure":
            RECONCILE_PASSES.labels("failed").inc()
        return
    if task_name == SEARCH_TASK and seconds is not None:
        method = str(retval.get("method", "engram"))
        source = "qdrant" if retval.get("source") == "qdrant" else "neo4j"
        SEARCH_SECONDS.labels(method if method in METHODS else "other", source).observe(seconds)
    elif task_name == RECONCILE_TASK:
        reconciled(retval)
    elif task_name == EMBED_TASK and isinstance(retval.get("model_cpu_s"), int | float):
        backend = str(retval.get("backend"))
        EMBED_MODEL_CPU.labels(backend if backend in BACKENDS else "other").inc(float(retval["model_cpu_s"]))


def reconciled(report: Mapping[str, Any]) -> None:
    """One reconciler pass's report (shared/services/reconcile.py's ``ReconcileReport``)."""
    if report.get("dry_run"):
        outcome = "dry_run"
    elif report.get("primary_lost"):
        outcome = "primary_lost"
    elif report.get("error"):
        outcome = "error"
    else:
        outcome = "applied"
    RECONCILE_PASSES.labels(outcome).inc()
    if outcome == "dry_run":
        return
    fixed = report.get("drift_fixed") or {}
    for kind in DRIFT_KINDS:
        count = int(fixed.get(kind) or 0)
        if count:
            DRIFT_FIXED.labels(kind).inc(count)
    for action in ("resynced", "deleted", "still_failed"):
        count = int(report.get(action) or 0)
        if count:
            RECONCILE_MEMORIES.labels(action).inc(count)
    for kind, key in (("resent", "redelivered"), ("given_up", "redelivery_given_up")):
        count = int(report.get(key) or 0)
        if count:
            REDELIVERED.labels(kind).inc(count)


# Read at scrape time.


@dataclass
class Readings:
    """What the stores say now; a part whose store did not answer stays None."""

    queues: dict[str, int] | None = None
    documents: dict[str, int] | None = None
    vector_sync: dict[str, int] | None = None
    oldest_pending_age_s: float | None = None
    tombstones: int | None = None
    primary_lost: bool | None = None
    neo4j_memories: int | None = None
    qdrant_points: int | None = None
    up: dict[str, bool] = field(default_factory=dict)


class StoreCollector(Collector):
    """Gauges read from Redis and Neo4j when scraped, reused for ``cache_s`` (a scrape every few
    seconds from several Prometheus servers reads the stores once)."""

    def __init__(
        self, read: Callable[[], Readings], cache_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._read = read
        self._cache_s = cache_s
        self._clock = clock
        self._lock = threading.Lock()
        self._cached: tuple[float, Readings] | None = None

    def readings(self) -> Readings:
        with self._lock:
            now = self._clock()
            if self._cached is None or now - self._cached[0] >= self._cache_s:
                self._cached = (now, self._read())
            return self._cached[1]

    def collect(self) -> Iterator[Metric]:
        r = self.readings()
        up = GaugeMetricFamily(
            "engram_metrics_source_up", "Whether /metrics could read this store just now.", labels=["source"]
        )
        for source, ok in sorted(r.up.items()):
            up.add_metric([source], 1.0 if ok else 0.0)
        yield up
        yield from _labelled(
            "engram_queue_depth", "Messages waiting in each Celery queue.", "queue", r.queues
        )
        yield from _labelled(
            "engram_documents",
            "Documents by pipeline state, as their progress records in Redis hold them "
            "(records expire after ENGRAM_STAGING_TTL_S).",
            "state",
            r.documents,
        )
        yield from _labelled(
            "engram_vector_sync_memories", "Memories by vector_sync state.", "state", r.vector_sync
        )
        yield from _single(
            "engram_vector_sync_oldest_pending_age_seconds",
            "Age of the oldest Memory still pending its Qdrant write (0: none pending).",
            r.oldest_pending_age_s,
        )
        yield from _single(
            "engram_vector_sync_tombstones", "Deletes Qdrant has not confirmed yet.", r.tombstones
        )
        yield from _single(
            "engram_primary_lost",
            "1 while the reconciler finds the primary is not the store Qdrant was synced with "
            "(it deletes nothing then; engram restore).",
            None if r.primary_lost is None else float(r.primary_lost),
        )
        stored = GaugeMetricFamily("engram_store_memories", "Memories in each store.", labels=["store"])
        for store, count in (("neo4j", r.neo4j_memories), ("qdrant", r.qdrant_points)):
            if count is not None:
                stored.add_metric([store], float(count))
        yield stored


def _labelled(name: str, help_text: str, label: str, counts: dict[str, int] | None) -> Iterator[Metric]:
    if counts is None:
        return
    family = GaugeMetricFamily(name, help_text, labels=[label])
    for key, count in sorted(counts.items()):
        family.add_metric([key], float(count))
    yield family


def _single(name: str, help_text: str, value: float | None) -> Iterator[Metric]:
    if value is not None:
        yield GaugeMetricFamily(name, help_text, value=float(value))


class FilesCollector(Collector):
    """Every process's multiprocess files under the metrics folder, of every host, merged."""

    def __init__(self, root: Path) -> None:
        self._root = root

    def collect(self) -> Iterator[Metric]:
        files = glob.glob(os.path.join(self._root, "*", "*.db"))
        yield from MultiProcessCollector.merge(files, accumulate=True)  # type: ignore[no-untyped-call]


def embed_model_cpu_s(settings: Settings) -> float:
    """``engram_embed_model_cpu_seconds`` summed over backends and processes, read from this host's
    files (``engram bench`` reads it before and after an ingestion)."""
    return sum(
        sample.value
        for family in FilesCollector(settings.metrics_path).collect()
        if family.name == EMBED_MODEL_CPU._name
        for sample in family.samples
        if sample.name.endswith("_total")
    )


def registry(settings: Settings, stores: StoreCollector | None) -> CollectorRegistry:
    """What one scrape of ``/metrics`` reads: the processes' files, then the stores."""
    made = CollectorRegistry(auto_describe=False)
    made.register(FilesCollector(settings.metrics_path))
    if stores is not None:
        made.register(stores)
    return made


def wipe(settings: Settings) -> None:
    """Removes every process's files: for a stack starting afresh only (see the module's note)."""
    for path in glob.glob(os.path.join(settings.metrics_path, "*", "*.db")):
        Path(path).unlink(missing_ok=True)
