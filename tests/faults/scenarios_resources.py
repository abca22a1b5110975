"""Scenarios of a resource running out: a disk filling up, Redis at its maxmemory.

``disk-full`` puts the embedded Qdrant folder (the backup, written by the write worker: the store
that grows with every vector) on a small tmpfs mounted for the scenario, fills the tmpfs to the
last byte once the first batch is written and before the rest are sent, then frees it. Neo4j
keeps its own disk: the primary keeps taking writes, the backup's fail with the disk's reason,
and once space returns the retries and the one reconcile pass sync them. The mount is undone (the folder copied back to disk) even when the scenario fails.

``redis-maxmemory`` lowers Redis's maxmemory (noeviction, as ops/ and compose run it) just above
what it holds, then bulk-loads through both producers, the HTTP app (a uvicorn process of its own,
loopback, auth ``local``) and ``engram ingest``, until each has been refused. A refusal must be a
503 / exit 3 naming Redis, never a 500 or a hang; what was accepted must end done. Memory then
comes back (maxmemory as before) and the refused loads are sent again, as their producers would.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import httpx

from shared.models import DocumentIn
from tests.faults import corpus
from tests.faults.stack import FaultStack, wait_for
from tests.faults.trial import Context, ScenarioResult, Trial

ENGRAM = str(Path(sys.executable).with_name("engram"))
UVICORN = str(Path(sys.executable).with_name("uvicorn"))
TMPFS_SIZE = "16m"
# Qdrant Edge's shard takes about 16 MB of a tmpfs new and about 100 MB once reopened (a tmpfs
# allocates its memory-mapped files whole): Edge's folder gets room for that and the run before
# it is filled.
TMPFS_SIZE_EDGE = "256m"
MAXMEMORY_MARGIN = 384 * 1024  # above what Redis holds when the load starts
DISK_FULL_REASONS = ("database or disk is full", "No space left on device", "Errno 28")

# Disk full.


@contextlib.contextmanager
def qdrant_on_tmpfs(stack: FaultStack) -> Iterator[Path]:
    """The embedded Qdrant folder on a tmpfs of its own while the block runs; copied back to disk
    and unmounted afterwards, whatever happened (the write worker, its owner, stopped meanwhile)."""
    folder = stack.qdrant_folder
    folder.mkdir(parents=True, exist_ok=True)
    aside = Path(tempfile.mkdtemp(prefix="qdrant-aside-", dir=stack.data_dir))
    stack.stop_worker("write", warm=True)
    for entry in folder.iterdir():
        shutil.move(str(entry), aside / entry.name)
    mounted = False
    try:
        size = TMPFS_SIZE_EDGE if stack.edge else TMPFS_SIZE
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], check=True)
        mounted = True
        for entry in aside.iterdir():
            shutil.move(str(entry), folder / entry.name)
        stack.start_worker("write")
        yield folder
    finally:
        stack.stop_worker("write", warm=True)
        if mounted:
            for entry in folder.glob("filler*"):
                entry.unlink()
            for entry in folder.iterdir():
                shutil.move(str(entry), aside / entry.name)
            subprocess.run(["umount", str(folder)], check=True)
        for entry in aside.iterdir():
            shutil.move(str(entry), folder / entry.name)
        aside.rmdir()
        stack.start_worker("write")


def fill(folder: Path) -> int:
    """Writes filler files until the filesystem is full, to the last byte; returns the bytes taken.
    Unbuffered: a close must not flush a refused write and raise."""
    written = 0
    for name, block in (("filler", b"\0" * 65536), ("filler-tail", b"\0")):
        with contextlib.suppress(OSError), (folder / name).open("wb", buffering=0) as out:
            while True:
                done = out.write(block)
                if not done:
                    break
                written += done
    return written


def integrity(stack: FaultStack, folder: Path) -> str:
    """Local mode: SQLite's own check of every database file under the Qdrant folder ("ok" each).
    Edge (no SQLite): the shard loaded again from disk (its WAL replayed) and every point read."""
    if stack.edge:
        try:
            with stack.backup() as store:
                counted = 0 if store is None else store.count()
                after: str | None = None
                scrolled = 0
                while store is not None:
                    page, after = store.scroll(after, 1000)
                    scrolled += len(page)
                    if after is None:
                        break
        except Exception as exc:
            return f"edge shard unreadable: {type(exc).__name__}: {exc}"
        return "ok" if counted == scrolled else f"edge counts {counted} points, scrolls {scrolled}"
    results = []
    for database in sorted(folder.rglob("*.sqlite")):
        connection = sqlite3.connect(database)
        try:
            results.append(str(connection.execute("PRAGMA integrity_check").fetchone()[0]))
        finally:
            connection.close()
    return ",".join(results) or "no database"


def disk_full(context: Context) -> ScenarioResult:
    """The disk of the embedded Qdrant folder fills up mid-run, then space returns: writes fail
    with the disk's reason, nothing is corrupt, everything ends done and in parity."""
    trial = Trial(context, "disk-full")
    stack = context.stack
    log = stack.logs / "worker-write.log"
    start = log.stat().st_size if log.exists() else 0
    documents = trial.documents()
    with qdrant_on_tmpfs(stack) as folder:
        # The first batch makes the backup's collection; the rest are sent once the disk is full,
        # so their pushes meet it however fast the pipeline is (all 68 once beat the filler)
        trial.ingest(documents[: trial.batch])
        trial.wait_first_write()
        wait_for(stack.collection_dir.exists, 60, 0.05)
        taken = fill(folder)
        try:
            trial.ingest(documents[trial.batch :])
            quick = trial.options.quick
            wait_for(
                lambda: trial.memories_in_neo4j() >= len(trial.expectation.memories()),
                20 if quick else 60,
                0.5,
            )
            trial.note(
                f"{trial.memories_in_neo4j()} memories in Neo4j with the disk full ({taken // 1024} KiB filler)"
            )
        finally:
            for entry in folder.glob("filler*"):
                entry.unlink()
        trial.undone()
        with log.open("rb") as out:
            out.seek(start)
            text = out.read().decode(errors="replace")
        reasons = [reason for reason in DISK_FULL_REASONS if reason in text]
        trial.note(
            "write failures said: " + (", ".join(reasons) if reasons else "no disk-full reason logged")
        )
        result = trial.finish()
        stack.stop_worker("write", warm=True)
        try:
            check = integrity(stack, folder)
        finally:
            stack.start_worker("write")
    trial.note(f"{'edge' if stack.edge else 'sqlite'} integrity {check}")
    ok = result.parity and bool(reasons) and all(r == "ok" for r in check.split(","))
    return trial.result(
        expected=result.expected,
        lost=result.lost,
        duplicated=result.duplicated,
        parity=ok,
        repair_s=result.repair_s,
        stale=result.stale,
        unsynced=result.unsynced,
    )


# Redis at its maxmemory.


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def http_app(stack: FaultStack) -> Iterator[str]:
    """The HTTP app as ops/ runs it (one uvicorn process) on a free loopback port, no API keys."""
    port = _free_port()
    log = (stack.logs / "api.log").open("ab")
    process = subprocess.Popen(
        [UVICORN, "producers.http.app:app", "--host", "127.0.0.1", "--port", str(port)],
        env=stack.env(ENGRAM_AUTH_MODE="local"),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        if not wait_for(lambda: httpx.get(f"{url}/healthz", timeout=10).status_code < 600, 120, 0.5):
            raise RuntimeError("the HTTP app did not answer in 120 s")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _used_memory(stack: FaultStack) -> int:
    return int(cast(dict[str, int], stack.redis.info("memory"))["used_memory"])


def redis_maxmemory(context: Context) -> ScenarioResult:
    """Redis reaches its maxmemory during a bulk ingest through the HTTP app and ``engram ingest``:
    each producer gets a clear 503 (exit 3), nothing accepted is lost, and once memory is back
    everything accepted, and everything sent again, ends done."""
    trial = Trial(context, "redis-maxmemory")
    stack = context.stack
    size = 40
    refused: list[list[DocumentIn]] = []
    http: dict[str, int] = {}
    cli: dict[str, int] = {}
    answers: list[str] = []
    previous = cast(dict[str, str], stack.redis.config_get("maxmemory"))["maxmemory"]
    with http_app(stack) as url, httpx.Client(base_url=url, timeout=60) as web:
        limit = _used_memory(stack) + MAXMEMORY_MARGIN
        stack.redis.config_set("maxmemory", limit)
        trial.note(f"maxmemory {limit // 1024} KiB")
        try:
            deadline = time.monotonic() + (90 if trial.options.quick else 240)
            n = 0
            while time.monotonic() < deadline and n < 40_000:
                docs = corpus.documents(trial.user_id, size, revision=0, start=n)
                n += size
                if (n // size) % 2:
                    answer = web.post(
                        "/api/documents", json=[d.model_dump(mode="json", exclude_none=True) for d in docs]
                    )
                    http[str(answer.status_code)] = http.get(str(answer.status_code), 0) + 1
                    if answer.status_code == 202:
                        trial.accepted(docs, int(answer.json()["version"]))
                    else:
                        refused.append(docs)
                        if answer.status_code == 503 and len(answers) < 1:
                            answers.append(f"http 503: {answer.json().get('detail', '')[:110]}")
                else:
                    path = stack.data_dir / f"{trial.user_id}-{n}.jsonl"
                    path.write_text(
                        "".join(
                            json.dumps({"id": d.document_id, "text": d.text, "title": d.title}) + "\n"
                            for d in docs
                        )
                    )
                    command = [
                        ENGRAM,
                        "ingest",
                        str(path),
                        "--user",
                        trial.user_id,
                        "--batch",
                        str(size),
                        "--no-wait",
                    ]
                    done = subprocess.run(
                        command, env=stack.env(), capture_output=True, text=True, timeout=120, check=False
                    )
                    cli[str(done.returncode)] = cli.get(str(done.returncode), 0) + 1
                    if done.returncode == 0:
                        trial.accepted(docs, None)
                    else:
                        refused.append(docs)
                        if done.returncode == 3 and len(answers) < 2:
                            answers.append(f"cli exit 3: {done.stderr.strip().splitlines()[-1][:110]}")
                if http.get("503") and cli.get("3"):
                    break
            time.sleep(5)  # the workers meanwhile meet the full Redis too
        finally:
            stack.redis.config_set("maxmemory", previous)
    trial.undone()
    trial.note("http " + " ".join(f"{k}={v}" for k, v in sorted(http.items())))
    trial.note("cli exit " + " ".join(f"{k}={v}" for k, v in sorted(cli.items())))
    trial.notes.extend(answers)
    for docs in refused:  # sent again by their producers, now that Redis has room
        trial.ingest(docs, batch=size)
    result = trial.finish()
    clear = set(http) <= {"202", "503"} and set(cli) <= {"0", "3"} and "503" in http and "3" in cli
    if not clear:
        trial.note("a producer was not refused with a clear 503 / exit 3")
    return trial.result(
        expected=result.expected,
        lost=result.lost,
        duplicated=result.duplicated,
        parity=result.parity and clear,
        repair_s=result.repair_s,
        stale=result.stale,
        unsynced=result.unsynced,
    )


SCENARIOS = {"disk-full": disk_full, "redis-maxmemory": redis_maxmemory}
