"""The chaos soak: a seeded random schedule of faults while documents are ingested, re-ingested
with new versions and deleted; at the end every document in its last state in both stores.

The schedule is drawn from the seed alone (``ops/faults --soak --seed N --minutes M``), printed
before it runs and again in the row, so a failing run can be replayed. Faults come one after
another, each undone before the next: SIGKILLed workers (main and pool children), Redis restarted
(``shutdown``, or kill -9), Neo4j stopped for 30-90 s, Qdrant's collection folder made unwritable,
and a power cut: every process of the stack SIGKILLed at once (workers, Redis, Neo4j), then started
again in the order ops/ starts them (Redis, Neo4j, workers). Durations scale down with
``--minutes`` under 10, so a short run still has every kind of fault. A power cut loses the
workers' unacknowledged tasks until the visibility timeout passes, so it is drawn in the first
half of the window: the run's end is then not a wait on it.

A producer thread (a client of its own, as a separate program would be) sends meanwhile: new
documents, new versions of live ones, deletes of live ones. A call a fault refuses is tried again
until accepted, as a producer that was answered 503 would; only what was accepted is expected.
"""

from __future__ import annotations

import random
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from producers.client import EngramClient
from shared.models import DocumentIn
from tests.faults import corpus
from tests.faults.stack import FaultStack, _alive, _kill, children_of, wait_for
from tests.faults.trial import Context, ScenarioResult, Trial, version_of

KINDS = ("kill-worker", "redis-restart", "redis-kill9", "neo4j-stop", "qdrant-unwritable", "power-cut")
KILLABLE = ("ingest", "embed", "write", "query")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Event:
    at_s: float  # from the start of the load
    kind: str
    hold_s: float = 0.0  # how long the fault lasts before it is undone
    target: str = ""

    def describe(self) -> str:
        text = f"{self.at_s:.0f}s {self.kind}"
        if self.target:
            text += f" {self.target}"
        if self.hold_s:
            text += f" {self.hold_s:.0f}s"
        return text


def scale_of(minutes: float) -> float:
    """Fault lengths as drawn for a 10-minute run, shortened in proportion for a shorter one."""
    return min(1.0, max(0.15, minutes / 10))


def _draw(rng: random.Random, kind: str, at_s: float, scale: float) -> Event:
    if kind == "kill-worker":
        return Event(at_s, kind, 0.0, rng.choice(KILLABLE))
    if kind == "redis-restart" or kind == "redis-kill9":
        return Event(at_s, kind, round(rng.uniform(2, 10) * scale + 1, 1))
    if kind == "neo4j-stop":
        return Event(at_s, kind, round(max(5.0, rng.uniform(30, 90) * scale), 1))
    if kind == "qdrant-unwritable":
        return Event(at_s, kind, round(max(5.0, rng.uniform(15, 45) * scale), 1))
    return Event(at_s, kind)


# What a fault costs on top of its hold (a Neo4j start, a worker's start), for the spacing.
_COST_S = {"neo4j-stop": 25.0, "power-cut": 40.0, "kill-worker": 8.0}


def schedule(seed: int, minutes: float) -> list[Event]:
    """The faults of a run: each kind once in a random order (the power cut in the first half),
    then more drawn at random while the window lasts. The same seed and minutes, the same list."""
    rng = random.Random(seed)
    window = minutes * 60 * 0.6  # the load runs for 60% of the run; the rest is recovery
    scale = scale_of(minutes)
    kinds = [k for k in KINDS if k != "power-cut"]
    rng.shuffle(kinds)
    kinds.insert(rng.randint(0, len(kinds) // 2), "power-cut")
    events: list[Event] = []
    at = rng.uniform(3, 10) * scale + 2
    while kinds or at < window:
        kind = kinds.pop(0) if kinds else rng.choice(KINDS[:-1])
        event = _draw(rng, kind, round(at, 1), scale)
        events.append(event)
        at += event.hold_s + _COST_S.get(kind, 3.0) * scale + rng.uniform(2, 12) * scale
    return events


# Causing and undoing.


def _neo4j_pids(stack: FaultStack) -> list[int]:
    pidfile = stack.data_dir / "neo4j" / "neo4j.pid"
    try:
        pid = int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return []
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        if _alive(current):
            found.append(current)
            todo.extend(children_of(current))
    return found


def _redis_pid(stack: FaultStack) -> list[int]:
    try:
        return [int((stack.data_dir / "run" / "redis.pid").read_text().split()[0])]
    except (OSError, ValueError, IndexError):
        return []


def power_cut(stack: FaultStack) -> None:
    """Every process of the stack SIGKILLed at once, then started again as ops/start does."""
    targets = _redis_pid(stack) + _neo4j_pids(stack)
    for worker in stack.workers.values():
        targets += [*children_of(worker.pid), worker.pid]
    _kill(targets)
    for worker in stack.workers.values():
        worker.process.wait()
    wait_for(lambda: not any(_alive(pid) for pid in targets), 30, 0.1)
    stack.workers.clear()
    (stack.data_dir / "neo4j" / "neo4j.pid").unlink(missing_ok=True)
    time.sleep(1)
    stack.redis_start()
    stack.neo4j_start()
    stack.ensure_workers()


def _hold(stack: FaultStack, seconds: float) -> None:
    """Waits out a fault, restarting meanwhile any worker that exits (as its supervisor would)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        _revive(stack)
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))


def _revive(stack: FaultStack) -> None:
    try:
        stack.revive()
    except Exception as exc:  # a worker that cannot start while Redis is down: next time
        print(f"soak: revive: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)


def cause(stack: FaultStack, event: Event) -> None:
    if event.kind == "kill-worker":
        stack.worker(event.target).kill()
        stack.start_worker(event.target)
    elif event.kind == "redis-restart" or event.kind == "redis-kill9":
        if event.kind == "redis-kill9":
            stack.redis_kill9()
        else:
            stack.redis_shutdown()
        _hold(stack, event.hold_s)
        stack.redis_start()
    elif event.kind == "neo4j-stop":
        stack.neo4j_stop()
        _hold(stack, event.hold_s)
        stack.neo4j_start()
    elif event.kind == "qdrant-unwritable":
        stack.freeze_qdrant()
        try:
            _hold(stack, event.hold_s)
        finally:
            stack.unfreeze_qdrant()
    elif event.kind == "power-cut":
        power_cut(stack)
    else:
        raise ValueError(f"unknown fault {event.kind!r}")


# The load.


class Load(threading.Thread):
    """New documents, new versions and deletes, one call after another until stopped; a refused
    call is tried again until accepted (a delete goes straight to Neo4j, so it waits for Neo4j)."""

    def __init__(self, trial: Trial, client: EngramClient, seed: int) -> None:
        super().__init__(name="soak-load", daemon=True)
        self.trial = trial
        self.client = client
        self.rng = random.Random(seed)
        self.stopping = threading.Event()
        self.revisions: dict[int, int] = {}  # live documents and their last revision
        self.next_id = 0
        self.calls = {"ingest": 0, "update": 0, "delete": 0, "refused": 0}
        self.errors: dict[str, int] = {}  # refusals by call and exception type
        self.lock = threading.Lock()

    def run(self) -> None:
        while not self.stopping.is_set():
            roll = self.rng.random()
            live = sorted(self.revisions)
            if roll < 0.5 or len(live) < 10:
                count = self.rng.randint(4, 12)
                numbers = list(range(self.next_id, self.next_id + count))
                self.next_id += count
                self.send_ingest("ingest", numbers, 0)
            elif roll < 0.8:
                numbers = self.rng.sample(live, min(len(live), self.rng.randint(2, 8)))
                self.send_ingest("update", numbers, max(self.revisions[n] for n in numbers) + 1)
            else:
                self.send_delete(self.rng.choice(live))
            self.stopping.wait(self.rng.uniform(0.5, 2.0))

    def _retry(self, call: str, attempt: Callable[[], T]) -> T:
        while True:
            try:
                return attempt()
            except Exception as exc:
                self.calls["refused"] += 1
                kind = f"{call}:{type(exc).__name__}"
                self.errors[kind] = self.errors.get(kind, 0) + 1
                if self.errors[kind] == 1:  # the first of each kind, with its message
                    print(
                        f"soak: {call} refused ({type(exc).__name__}), trying again: {str(exc)[:200]}",
                        file=sys.stderr,
                        flush=True,
                    )
                time.sleep(1.0)

    def send_ingest(self, call: str, numbers: list[int], revision: int) -> None:
        user = self.trial.user_id
        docs = [
            DocumentIn(user_id=user, id=f"doc-{n:05d}", text=corpus.text_of(n, revision), title=f"Notes {n}")
            for n in numbers
        ]
        accepted = self._retry(call, lambda: self.client.ingest(docs, batch_documents=len(docs)))
        with self.lock:
            self.trial.accepted(docs, version_of(accepted))
            self.revisions.update((n, revision) for n in numbers)
        self.calls[call] += 1

    def send_delete(self, number: int) -> None:
        document_id = f"doc-{number:05d}"
        self._retry("delete", lambda: self.client.delete_document(self.trial.user_id, document_id))
        with self.lock:
            self.revisions.pop(number, None)
            self.trial.expectation.deleted([document_id])
            self.trial.sent_ids.discard(document_id)
        self.calls["delete"] += 1


def soak(context: Context) -> ScenarioResult:
    """A seeded random schedule of faults (workers SIGKILLed, Redis restarted and kill -9ed, Neo4j
    stopped, Qdrant unwritable, a power cut of the whole stack) while documents are ingested,
    updated and deleted; every document ends in its last state in both stores."""
    options = context.options
    seed = options.seed if options.seed is not None else random.SystemRandom().randrange(1, 10_000)
    minutes = options.soak_minutes or (1.5 if options.quick else 10.0)
    events = schedule(seed, minutes)
    plan = "; ".join(e.describe() for e in events)
    print(f"soak: seed {seed}, {minutes:g} min, schedule: {plan}", file=sys.stderr, flush=True)
    trial = Trial(context, "soak")
    stack = context.stack
    client = context.new_client()
    load = Load(trial, client, seed)
    started = time.monotonic()
    load.start()
    try:
        trial.wait_first_write()
        for event in events:
            while time.monotonic() - started < event.at_s:
                _hold(stack, min(1.0, event.at_s - (time.monotonic() - started)))
            print(f"soak: {time.monotonic() - started:.0f}s {event.describe()}", file=sys.stderr, flush=True)
            cause(stack, event)
        end = minutes * 60 * 0.6
        _hold(stack, max(0.0, end - (time.monotonic() - started)))
    finally:
        load.stopping.set()
        load.join(timeout=600)
        stack.unfreeze_qdrant()
        client.close()
    stack.ensure_workers()
    trial.notes.append(f"seed {seed} {minutes:g} min: {plan}")
    trial.notes.append(
        "load: " + " ".join(f"{k}={v}" for k, v in load.calls.items()) + f" live={len(load.revisions)}"
    )
    if load.errors:
        trial.notes.append("refused " + " ".join(f"{k}={v}" for k, v in sorted(load.errors.items())))
    trial.undone()
    return trial.finish()


SCENARIOS = {"soak": soak}
