"""The scenarios: each causes one fault on the real stack, undoes it, and returns a typed result.

Every fault is caused, not simulated: processes get SIGKILL, Redis and Neo4j are stopped and
started, Qdrant's folder is made unwritable, drift is made by hand in each store. What each must
end with is in its docstring; scenarios that need what the stage layer does not do yet (versions,
deletes, a reconciler that finds drift both ways) fail until it does.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from shared.ids import document_key
from tests.faults import corpus, scenarios_resources, soak
from tests.faults.restore_scenarios import RESTORE_SCENARIOS
from tests.faults.stack import wait_for
from tests.faults.trial import Context, ScenarioResult, Trial, recording_chunk_tasks, version_of
from workers.app import CHUNK_TASK

ANY_VERSION = 2**62
"""A delete at this version takes a point whatever version it holds (drift made by hand)."""

Scenario = Callable[[Context], ScenarioResult]
ENGRAM = str(Path(sys.executable).with_name("engram"))
EMBED_TASK_NAME = "engram.embed.embed_batch"
QDRANT_DOWN = {"ENGRAM_QDRANT_URL": "http://127.0.0.1:9", "ENGRAM_QDRANT_TIMEOUT_S": "2"}


def _share(trial: Trial, fraction: float) -> int:
    return max(2, int(trial.options.docs * fraction))


def _until_neo4j_holds(trial: Trial, share: float, timeout_s: float) -> None:
    """Lets the run go on under the fault until Neo4j holds a share of the Memories, within a bound."""
    target = int(len(trial.expectation.memories()) * share)
    wait_for(lambda: trial.memories_in_neo4j() >= target, timeout_s, 0.2)
    trial.note(f"{trial.memories_in_neo4j()} memories in Neo4j when undone")


# Workers killed.


def embed_kill_child(context: Context) -> ScenarioResult:
    """The embed worker's pool child is SIGKILLed mid-batch; its main process re-queues the task at
    once (the write worker runs threads: it has no pool child to lose)."""
    trial = Trial(context, "embed-kill-child")
    trial.ingest(trial.documents())
    worker = context.stack.worker("embed")
    if wait_for(lambda: worker.received(EMBED_TASK_NAME) >= 1, 120, 0.05):
        time.sleep(0.5)
        worker.kill(main=False)
        trial.note(f"pool child killed after {worker.received(EMBED_TASK_NAME)} embed tasks taken")
    trial.undone()
    return trial.finish()


def write_kill_main(context: Context) -> ScenarioResult:
    """The write worker (its one process: a thread pool) is SIGKILLed mid-batch, then restarted."""
    trial = Trial(context, "write-kill-main")
    trial.ingest(trial.documents())
    if trial.wait_first_write():
        context.stack.worker("write").kill()
        trial.note(f"killed with {trial.memories_in_neo4j()} memories in Neo4j")
    context.stack.start_worker("write")
    trial.undone()
    return trial.finish()


def embed_kill(context: Context) -> ScenarioResult:
    """The embed worker (main and child) is SIGKILLed while embedding a batch, then restarted."""
    trial = Trial(context, "embed-kill")
    trial.ingest(trial.documents())
    worker = context.stack.worker("embed")
    if wait_for(lambda: worker.received(EMBED_TASK_NAME) >= 1, 120, 0.05):
        time.sleep(0.5)
        worker.kill()
        trial.note(f"killed after {worker.received(EMBED_TASK_NAME)} embed tasks taken")
    context.stack.start_worker("embed")
    trial.undone()
    return trial.finish()


# Qdrant.


def qdrant_unreachable(context: Context) -> ScenarioResult:
    """The write worker cannot reach Qdrant for part of the run; Memories land failed, reconcile fixes."""
    trial = Trial(context, "qdrant-unreachable")
    trial.ingest(trial.documents())
    trial.wait_first_write()
    context.stack.restart_worker("write", env=QDRANT_DOWN)
    _until_neo4j_holds(trial, 0.67, 60)
    context.stack.restart_worker("write")
    trial.undone()
    return trial.finish()


def qdrant_unwritable(context: Context) -> ScenarioResult:
    """Qdrant's storage becomes unwritable mid-run (chattr +i on the collection folder), then writable."""
    trial = Trial(context, "qdrant-unwritable")
    trial.ingest(trial.documents())
    trial.wait_first_write()
    context.stack.freeze_qdrant()
    try:
        _until_neo4j_holds(trial, 0.67, 15 if trial.options.quick else 30)
    finally:
        context.stack.unfreeze_qdrant()
    trial.undone()
    return trial.finish()


# Neo4j.


def neo4j_down(context: Context) -> ScenarioResult:
    """Neo4j stops mid-run for a while (5 minutes; 30 s quick), then starts again."""
    trial = Trial(context, "neo4j-down")
    trial.ingest(trial.documents())
    trial.wait_first_write()
    context.stack.neo4j_stop()
    time.sleep(trial.options.neo4j_outage_s)
    context.stack.neo4j_start()
    trial.note(f"Neo4j down {trial.options.neo4j_outage_s:g} s")
    trial.undone()
    return trial.finish()


# Redis.


def redis_restart_queued(context: Context) -> ScenarioResult:
    """Redis restarts (``redis-cli shutdown``) while the tasks are only queued, nothing running."""
    trial = Trial(context, "redis-restart-queued")
    context.stack.stop_worker("ingest", warm=True)
    trial.ingest(trial.documents())
    context.stack.redis_shutdown()
    context.stack.redis_start()
    context.stack.start_worker("ingest")
    trial.undone()
    return trial.finish()


def message_lost(context: Context) -> ScenarioResult:
    """A stage message vanishes from the broker, as kombu's Redis transport can lose one: BRPOP
    takes it off the queue and only then is it recorded in ``unacked``, so a worker killed (or cut
    from Redis) in between drops it for good. Here an ingest message and then an embed message are
    popped by hand while their workers are stopped; the reconciler's pass sends both again."""
    trial = Trial(context, "message-lost")
    stack = context.stack
    stack.stop_worker("ingest", warm=True)
    stack.stop_worker("embed", warm=True)
    trial.ingest(trial.documents())
    popped = [stack.redis.rpop("ingest")]  # the oldest: the one the next BRPOP would take
    stack.start_worker("ingest")
    wait_for(lambda: int(stack.redis.llen("embed")) > 0, 60, 0.05)  # type: ignore[arg-type]
    popped.append(stack.redis.rpop("embed"))
    stack.start_worker("embed")
    trial.note(f"{sum(1 for m in popped if m)} messages popped")
    trial.undone()
    return trial.finish()


def _redis_down_while_running(context: Context, name: str, kill9: bool) -> ScenarioResult:
    trial = Trial(context, name)
    trial.ingest(trial.documents())
    trial.wait_first_write()
    if kill9:
        context.stack.redis_kill9()
    else:
        context.stack.redis_shutdown()
    time.sleep(5)
    context.stack.redis_start()
    trial.undone()
    return trial.finish()


def redis_restart_running(context: Context) -> ScenarioResult:
    """Redis shuts down gracefully while every stage is at work, and starts 5 s later."""
    return _redis_down_while_running(context, "redis-restart-running", kill9=False)


def redis_kill9_running(context: Context) -> ScenarioResult:
    """Redis is SIGKILLed while every stage is at work (AOF fsyncs every second), and starts 5 s later."""
    return _redis_down_while_running(context, "redis-kill9-running", kill9=True)


def redis_down_mid_cli(context: Context) -> ScenarioResult:
    """Redis shuts down while ``engram ingest`` is enqueueing; once it is back the load is run again."""
    trial = Trial(context, "redis-down-mid-cli")
    stack = context.stack
    docs = trial.documents()
    path = stack.data_dir / f"{trial.user_id}.jsonl"
    path.write_text("".join(json.dumps({"id": d.document_id, "text": d.text}) + "\n" for d in docs))
    command = [ENGRAM, "ingest", str(path), "--user", trial.user_id, "--batch", "4", "--no-wait"]
    base = stack.keys()
    cli = subprocess.Popen(command, env=stack.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    trial.accepted(docs, None)  # the CLI does not print the version it was given
    wait_for(lambda: stack.keys() - base >= len(docs) // 3, 120, 0.005)
    stack.redis_shutdown()
    try:
        output, _ = cli.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        cli.kill()
        output, _ = cli.communicate()
    lines = output.decode(errors="replace").strip().splitlines()
    trial.note(f"CLI exit {cli.returncode}: {lines[-1][:100] if lines else ''}")
    stack.redis_start()
    trial.undone()
    again = subprocess.run(command, env=stack.env(), capture_output=True, timeout=300, check=False)
    trial.accepted(docs, None)
    trial.note(f"re-run exit {again.returncode}")
    return trial.finish()


# Repeats, drift and versions.


def same_docs_3x(context: Context) -> ScenarioResult:
    """The same documents sent three times at once by three producers."""
    trial = Trial(context, "same-docs-3x")
    docs = trial.documents()
    clients = [context.new_client() for _ in range(3)]
    start = threading.Barrier(3)

    def send(index: int) -> int | None:
        start.wait()
        return version_of(clients[index].ingest(docs, batch_documents=trial.batch))

    try:
        with ThreadPoolExecutor(3) as pool:
            versions = list(pool.map(send, range(3)))
    finally:
        for client in clients:
            client.close()
    for version in versions:
        trial.accepted(docs, version)
    trial.undone()
    return trial.finish()


def drift_by_hand(context: Context) -> ScenarioResult:
    """Points deleted from Qdrant, Memories deleted from Neo4j, payloads made stale, all by hand.

    Neo4j is the truth: the reconciler must re-push the missing and stale points and delete the
    points whose Memory is gone.
    """
    trial = Trial(context, "drift-by-hand")
    stack = context.stack
    trial.ingest(trial.documents())
    trial.settle()
    records, _, _ = stack.neo4j.execute_query(
        "MATCH (m:Memory {user_id: $u}) RETURN m.id AS id ORDER BY id", u=trial.user_id
    )
    ids = [r["id"] for r in records]
    n = min(50, len(ids) // 5)
    from_qdrant, from_neo4j, stale = ids[:n], ids[n : 2 * n], ids[2 * n : 2 * n + max(1, n // 5)]
    stack.stop_worker("write", warm=True)
    try:
        with stack.backup() as store:
            if store is None:
                raise RuntimeError("drift-by-hand: no collection after the load")
            store.delete(dict.fromkeys(from_qdrant, ANY_VERSION))
            drifted = [
                dataclasses.replace(p, payload={**p.payload, "content_hash": "drifted"})
                for p in store.retrieve(stale)
            ]
            store.upsert(drifted)  # at the version each holds: the guard lets it through
    finally:
        stack.start_worker("write")
    stack.neo4j.execute_query("MATCH (m:Memory) WHERE m.id IN $ids DETACH DELETE m", ids=from_neo4j)
    trial.expectation.dropped(from_neo4j)
    trial.note(f"drift: {n} points and {n} Memories deleted, {len(stale)} payloads stale")
    trial.undone()
    return trial.finish()


def batch_delivered_twice(context: Context) -> ScenarioResult:
    """Every ingest task message is delivered a second time (same task id) while the first is in flight."""
    trial = Trial(context, "batch-delivered-twice")
    docs = trial.documents()
    with recording_chunk_tasks() as published:
        accepted = trial.ingest(docs)
    for message in published:
        context.app.send_task(CHUNK_TASK, args=message.args, task_id=message.task_id)
    trial.accepted(docs, version_of(accepted))
    trial.undone()
    return trial.finish()


def version_retried(context: Context) -> ScenarioResult:
    """Version 1's ingest message comes again after version 2 landed: version 2 must remain."""
    trial = Trial(context, "version-retried")
    with recording_chunk_tasks() as first:
        trial.ingest(trial.documents(revision=1))
    trial.settle()
    trial.ingest(trial.documents(revision=2))
    trial.settle()
    for message in first:
        context.app.send_task(CHUNK_TASK, args=message.args)
    trial.sent += trial.options.docs
    trial.note(f"version 1 re-sent in {len(first)} tasks")
    trial.undone()
    return trial.finish()


def concurrent_versions(context: Context) -> ScenarioResult:
    """Two versions of the same documents in flight at once (ingest and embed scaled to two each):
    the later-accepted version must remain, whichever is written last."""
    trial = Trial(context, "concurrent-versions")
    stack = context.stack
    stack.restart_worker("ingest", concurrency=2)
    stack.restart_worker("embed", concurrency=2)
    try:
        docs = trial.documents()
        k = max(4, trial.options.docs // 50)
        # The updated documents close the first load, so both versions are chunked side by side.
        trial.ingest(docs)
        trial.ingest(corpus.documents(trial.user_id, k, revision=1, start=len(docs) - k), batch=k)
        trial.undone()
        return trial.finish()
    finally:
        stack.restart_worker("ingest")
        stack.restart_worker("embed")


def reconcile_racing_write(context: Context) -> ScenarioResult:
    """A reconcile pass repairing failed Memories runs while new versions of them are being written."""
    trial = Trial(context, "reconcile-racing-write")
    stack = context.stack
    stack.restart_worker("write", env=QDRANT_DOWN)
    trial.ingest(trial.documents())
    trial.settle()
    stack.restart_worker("write")
    trial.undone()
    half = corpus.documents(trial.user_id, trial.options.docs // 2, revision=1)
    accepted = trial.ingest(half)
    keys = [(document_key(trial.user_id, d.document_id), accepted.version) for d in half]
    wait_for(lambda: context.client.states(keys)["writing"] > 0, 120, 0.05)
    racer = context.new_client()
    try:
        with ThreadPoolExecutor(1) as pool:
            racing = pool.submit(trial.reconcile, racer)
            trial.settle()
            racing.result()
    finally:
        racer.close()
    return trial.finish(reconcile=False)


def update_delete_during_ingest(context: Context) -> ScenarioResult:
    """While a load is under way, some documents are updated and others deleted."""
    trial = Trial(context, "update-delete-mid-ingest")
    docs = trial.documents()
    trial.ingest(docs)
    trial.wait_first_write()
    k = _share(trial, 1 / 12)
    trial.ingest(corpus.documents(trial.user_id, k, revision=1), batch=k)
    doomed = [d.document_id for d in docs[-k:]]
    delete = getattr(context.client, "delete_document", None)
    if delete is None:
        trial.note("EngramClient.delete_document is not built")
    else:
        for document_id in doomed:
            delete(trial.user_id, document_id)
    trial.expectation.deleted(doomed)
    trial.undone()
    return trial.finish()


SCENARIOS: dict[str, Scenario] = {
    "embed-kill-child": embed_kill_child,
    "write-kill-main": write_kill_main,
    "embed-kill": embed_kill,
    "qdrant-unreachable": qdrant_unreachable,
    "qdrant-unwritable": qdrant_unwritable,
    "neo4j-down": neo4j_down,
    "redis-restart-queued": redis_restart_queued,
    "redis-restart-running": redis_restart_running,
    "redis-kill9-running": redis_kill9_running,
    "redis-down-mid-cli": redis_down_mid_cli,
    "same-docs-3x": same_docs_3x,
    "drift-by-hand": drift_by_hand,
    "batch-delivered-twice": batch_delivered_twice,
    "version-retried": version_retried,
    "concurrent-versions": concurrent_versions,
    "reconcile-racing-write": reconcile_racing_write,
    "update-delete-mid-ingest": update_delete_during_ingest,
    "message-lost": message_lost,
}
SCENARIOS.update(RESTORE_SCENARIOS)
SCENARIOS.update(soak.SCENARIOS)
SCENARIOS.update(scenarios_resources.SCENARIOS)

# Fast enough for ./ops/test (no wait on a visibility timeout or an outage), one of each kind.
QUICK = (
    "embed-kill-child",
    "qdrant-unreachable",
    "redis-restart-queued",
    "message-lost",
    "batch-delivered-twice",
    "drift-by-hand",
    "version-retried",
    "soak",
    "disk-full",
)
# The quick rows on a Qdrant server (ops/test's server pass): those whose subject is the backup —
# the server out of reach, drift made by hand, a version retried, a batch delivered twice. The
# others' subject is the embed child, Redis or a lost message, the same whatever the backup
# (the Edge pass runs them), and disk-full and the soak break the embedded folder's own storage.
# Kept to these four so CI's whole run stays well inside its 90 minutes.
QUICK_ON_SERVER = ("qdrant-unreachable", "drift-by-hand", "version-retried", "batch-delivered-twice")
