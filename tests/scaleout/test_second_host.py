"""A second worker host (issue 27): two worker groups, each its own supervisor, Celery node names and
log folder (ops/worker-host), share one Redis, Neo4j and Qdrant server. Both take work; then group
B is killed whole (its supervisord and every process under it, SIGKILL, as a lost machine) in the
middle of an ingest, while group A keeps answering searches.

What must hold: every accepted document ends ``done``, nothing is lost or duplicated, Neo4j and
Qdrant agree (tests/faults/parity.py), every search sent while B dies is answered, and the tasks B
held when it died (received, never finished: acknowledged late, so still Redis's) are run by A.
They come back through the Redis transport's visibility timeout (ENGRAM_VISIBILITY_TIMEOUT_S, 75 s:
a live worker restores a message unacknowledged that long), so the test waits that out, not an hour.
A message B had taken off its queue and not yet recorded in ``unacked`` when it died is lost to
Redis; the ledger's pass, which A's workers run themselves (workers/redeliver.py, no beat in this
row), sends it again after ENGRAM_REDELIVER_AFTER_S.

No other worker takes from the queues meanwhile (``without_stack_workers``): on a fresh clone's
full run, the stack's own workers, started for the session by an earlier test, were a third group
that took most of the work and wrote it to their embedded Qdrant.

Group B takes the pipeline's queues and not ``query``: a search a killed host held would wait out
its own timeout (a search is not worth redelivering after ENGRAM_SEARCH_TIMEOUT_S), and this row is
about searches answered by the group that lives. The figures go to the data folder's
logs/second-host.json.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import neo4j
import pytest
import redis

from producers.client import EngramClient
from shared.ids import document_key
from shared.models import SearchRequest
from shared.settings import Settings
from shared.stores.vectors import connect_vectors
from tests.faults import corpus, parity
from tests.faults.stack import children_of, wait_for
from tests.scaleout.qdrant_server import QdrantServer

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
HOST_A, HOST_B = "hosta", "hostb"
B_QUEUES = "ingest,embed,write,reconcile"
B_STAGES = {"engram.ingest.chunk_documents", "engram.embed.embed_batch", "engram.write.write_batch"}
DOCUMENTS = 400
BATCH = 5  # documents a chunk task: many small tasks, so both groups take a share
# What a caller waits by default (ENGRAM_SEARCH_TIMEOUT_S); the loop waits longer, so a search
# slowed by the busy machine is counted slow, not lost.
SEARCH_WAIT_S = 30
# A task B held comes back after the visibility timeout plus the few seconds in which a live
# worker looks for such messages; the rest of the ingest then finishes on A alone.
AFTER_VISIBILITY_S = 150
TASK_LINE = re.compile(r"Task ([\w.]+)\[([0-9a-f-]{36})\] (received|succeeded)")
LOST_LINE = "the broker lost stage message"  # shared/services/redeliver.py: one sent again


@dataclass
class Host:
    name: str
    env: dict[str, str]
    queues: str | None = None

    @property
    def folder(self) -> Path:
        return Path(self.env["ENGRAM_DATA_DIR"]) / "hosts" / self.name

    def ops(self, action: str) -> subprocess.CompletedProcess[str]:
        queues = ["--queues", self.queues] if self.queues and action == "start" else []
        return subprocess.run(
            [str(ROOT / "ops" / "worker-host"), action, self.name, *queues],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=400,
            check=False,
        )

    def tasks(self) -> dict[str, dict[str, str]]:
        """Task id -> its name and the last thing this group's logs say of it (received, succeeded)."""
        seen: dict[str, dict[str, str]] = {}
        for log in sorted((self.folder / "logs").glob("worker-*.log")):
            for match in TASK_LINE.finditer(log.read_text(errors="replace")):
                name, task_id, what = match.groups()
                entry = seen.setdefault(task_id, {"name": name, "state": what})
                if what == "succeeded" or entry["state"] != "succeeded":
                    entry["state"] = what
        return seen

    def lost_and_sent_again(self) -> int:
        """Stage messages this group's lost-message pass sent again (workers/redeliver.py)."""
        logs = sorted((self.folder / "logs").glob("worker-*.log"))
        return sum(log.read_text(errors="replace").count(LOST_LINE) for log in logs)

    def succeeded(self) -> Counter[str]:
        return Counter(t["name"] for t in self.tasks().values() if t["state"] == "succeeded")

    def supervisor_pid(self) -> int:
        return int((self.folder / "run" / "supervisord.pid").read_text().strip())


def unacked_ids(client: redis.Redis) -> set[str]:
    """The task ids of the messages Redis holds as delivered and not acknowledged (kombu's
    ``unacked`` hash: [message, exchange, routing key] by delivery tag)."""
    ids: set[str] = set()
    for raw in client.hvals("unacked"):
        try:
            ids.add(json.loads(raw)[0]["headers"]["id"])
        except (ValueError, KeyError, IndexError, TypeError):
            continue
    return ids


def _tree(pid: int) -> list[int]:
    found = [pid]
    for child in children_of(pid):
        found += _tree(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def kill_whole_group(host: Host) -> list[int]:
    """SIGKILL to the group's supervisord first (so it restarts nothing), then to every process
    that was under it: the Celery main processes and their pool children."""
    tree = _tree(host.supervisor_pid())
    for pid in tree:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert wait_for(lambda: not any(_alive(pid) for pid in tree), 10, 0.05), "group B outlived SIGKILL"
    return tree


@dataclass
class Searches:
    """Searches sent one after another from another thread, each timed; stopped by ``stop``."""

    client: EngramClient
    user_id: str
    latencies_ms: list[float] = field(default_factory=list)
    after_kill_ms: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _killed_at: float | None = None

    def mark_kill(self) -> None:
        self._killed_at = time.monotonic()

    def run(self) -> None:
        request = SearchRequest(user_id=self.user_id, query="a heron feeding near the salt marsh", top_k=3)
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.client.search(request, timeout_s=SEARCH_WAIT_S)
            except Exception as exc:  # a search not answered is what this counts
                when = (
                    "" if self._killed_at is None else f" ({started - self._killed_at:+.1f} s from the kill)"
                )
                self.failures.append(f"{type(exc).__name__}: {exc}{when}")
            else:
                took_ms = (time.monotonic() - started) * 1000
                self.latencies_ms.append(took_ms)
                if self._killed_at is not None and started >= self._killed_at - 1:
                    self.after_kill_ms.append(took_ms)
            time.sleep(0.2)

    def stop(self) -> None:
        self._stop.set()


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1) if ordered else float("nan")


@pytest.fixture
def hosts(
    settings: Settings, qdrant_server: QdrantServer, without_stack_workers: None
) -> Iterator[tuple[Host, Host]]:
    """Groups A (every queue) and B (the pipeline's) started by ops/worker-host on one Qdrant server
    and a collection prefix of this test's own, and no other worker on the queues; both stopped
    after (B is killed by the test)."""
    env = {
        **os.environ,
        "ENGRAM_QDRANT_URL": qdrant_server.url,
        "ENGRAM_QDRANT_API_KEY": qdrant_server.api_key.get_secret_value(),
        "ENGRAM_QDRANT_COLLECTION_PREFIX": f"host{uuid.uuid4().hex[:8]}",
    }
    a, b = Host(HOST_A, env), Host(HOST_B, env, B_QUEUES)
    try:
        for host in (a, b):
            done = host.ops("start")
            assert done.returncode == 0, f"ops/worker-host start {host.name}:\n{done.stdout}{done.stderr}"
        yield a, b
    finally:
        for host in (b, a):
            host.ops("stop")


# Two groups to start, an ingest, and the visibility timeout waited out: more than the suite's 600 s
# a test on a busy two-core machine.
@pytest.mark.timeout(1500)
def test_a_whole_worker_group_killed_mid_ingest_loses_nothing_and_searches_go_on(
    hosts: tuple[Host, Host],
    settings: Settings,
    qdrant_server: QdrantServer,
    redis_client: redis.Redis,
    neo4j_driver: neo4j.Driver,
) -> None:
    a, b = hosts
    user = f"tenant-{uuid.uuid4().hex[:12]}"
    client, search_client = EngramClient(settings), EngramClient(settings)
    expectation = corpus.Expectation(user, corpus.make_chunker(settings))
    documents = corpus.documents(user, DOCUMENTS)
    searches = Searches(search_client, user)
    searcher = threading.Thread(target=searches.run, daemon=True)
    try:
        # Given both groups running on the same queues, and searches going on
        searcher.start()
        accepted = client.ingest(documents, batch_documents=BATCH)
        expectation.accepted(documents, accepted.version)
        refs = [(document_key(user, d.document_id), accepted.version) for d in documents]

        # When B has run tasks of every stage it takes and holds one (received, not acknowledged:
        # in Redis's unacked set), it is killed whole
        def b_holds() -> set[str]:
            taken = {tid for tid, t in b.tasks().items() if t["state"] == "received"}
            return taken & unacked_ids(redis_client)

        ran_every_stage = wait_for(lambda: set(b.succeeded()) >= B_STAGES, 240, 0.1)
        wait_for(lambda: bool(b_holds()), 30, 0.02)
        done_at_kill = client.states(refs)["done"]
        killed = kill_whole_group(b)
        killed_at = time.monotonic()
        searches.mark_kill()
        b_tasks = b.tasks()
        held = {tid: t["name"] for tid, t in b_tasks.items() if t["state"] == "received"}
        held = {tid: name for tid, name in held.items() if tid in unacked_ids(redis_client)}
        assert done_at_kill < DOCUMENTS, "the ingest was over before group B was killed"

        # Then the tasks B held go back to their queues within the visibility timeout (not an
        # hour), A runs them, and every accepted document ends done, on A alone
        bound_s = settings.visibility_timeout_s + AFTER_VISIBILITY_S
        wait_for(lambda: not held.keys() & unacked_ids(redis_client), bound_s, 0.2)
        restored_s = time.monotonic() - killed_at
        wait_for(lambda: held.keys() <= a.tasks().keys(), bound_s, 0.5)
        redeliver_s = time.monotonic() - killed_at
        finished = wait_for(lambda: client.states(refs)["done"] == DOCUMENTS, bound_s, 0.5)
        finish_s = time.monotonic() - killed_at
        states = client.states(refs)
        time.sleep(2)  # searches go on a moment after the ingest
        searches.stop()
        searcher.join(timeout=60)
        a_tasks = a.tasks()
        redelivered = {tid for tid in held if a_tasks.get(tid, {}).get("state") == "succeeded"}
        connection = connect_vectors(qdrant_server.settings(a.env["ENGRAM_QDRANT_COLLECTION_PREFIX"]))
        try:
            dimensions = connection.dimensions_of(settings.embedding_model)
            assert dimensions, "no collection on the Qdrant server"
            points = parity.read_qdrant(connection.store(settings.embedding_model, dimensions[0]), user)
        finally:
            connection.close()
        memories, stored_documents = parity.read_neo4j(neo4j_driver, user)
        result = parity.compare(
            expectation.memories(),
            {document_key(user, d) for d in expectation.document_ids},
            memories,
            points,
            stored_documents,
        )
        figures = {
            "documents": DOCUMENTS,
            "memories": result.expected,
            "chunk_task_documents": BATCH,
            "tasks_by_host": {
                a.name: dict(a.succeeded()),
                b.name: dict(Counter(t["name"] for t in b_tasks.values() if t["state"] == "succeeded")),
            },
            "b_queues": B_QUEUES,
            "done_when_b_killed": done_at_kill,
            "b_processes_killed": len(killed),
            "b_ran_every_stage_before_kill": ran_every_stage,
            "b_tasks_held_when_killed": len(held),
            "held_tasks_back_in_queue_after_s": round(restored_s, 1),
            "held_tasks_taken_by_a_after_s": round(redeliver_s, 1),
            "held_tasks_run_by_a": len(redelivered),
            "lost_messages_sent_again_by_a": a.lost_and_sent_again(),
            "finish_after_kill_s": round(finish_s, 1),
            "visibility_timeout_s": settings.visibility_timeout_s,
            "states": dict(states),
            "lost": result.lost,
            "duplicated": result.duplicated,
            "parity": result.describe(),
            "searches_answered": len(searches.latencies_ms),
            "searches_failed": len(searches.failures),
            "search_p50_ms": _p(searches.latencies_ms, 0.50),
            "search_p99_ms": _p(searches.latencies_ms, 0.99),
            "search_max_ms": _p(searches.latencies_ms, 1.0),
            "searches_from_the_kill": len(searches.after_kill_ms),
            "search_p99_from_the_kill_ms": _p(searches.after_kill_ms, 0.99),
            "searches_over_default_timeout": sum(
                1 for ms in searches.latencies_ms if ms > settings.search_timeout_s * 1000
            ),
            "search_failures": searches.failures[:5],
        }
        print("second host:", json.dumps(figures, indent=1))
        (settings.data_dir / "logs").mkdir(parents=True, exist_ok=True)
        (settings.data_dir / "logs" / "second-host.json").write_text(json.dumps(figures, indent=1) + "\n")

        assert finished, f"not every document done {finish_s:.0f} s after the kill: {dict(states)}"
        assert sum(a.succeeded().values()) > 0 and sum(figures["tasks_by_host"][b.name].values()) > 0
        assert held, "group B held no task when killed: the row proves no redelivery"
        assert held.keys() == redelivered, f"tasks B held and A never finished: {held.keys() - redelivered}"
        assert result.ok and result.duplicated == 0, result.describe()
        assert result.lost == 0 and result.missing_documents == 0
        assert searches.failures == [], searches.failures[:5]
        assert len(searches.after_kill_ms) > 0
    finally:
        searches.stop()
        client.close()
        search_client.close()
