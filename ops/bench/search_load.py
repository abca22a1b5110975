"""Many searches at once against a running HTTP app, and /healthz timed meanwhile.

    .venv/bin/python ops/bench/search_load.py --searches 400 --user bench
    .venv/bin/python ops/bench/search_load.py --url http://127.0.0.1:8000 --api-key "$KEY"

Fires ``--searches`` semantic searches at the same moment (httpx, async, one connection each,
spread over ``--clients`` processes: one client loop holding 400 connections on a busy 2-core
machine adds seconds of its own to what it measures) and, while they are out, calls ``/healthz``
one call after another from a process of its own. Prints the searches' latency
(p50/p99/max), how many were 2xx, 504 and anything else, and /healthz's p99 and max during the
load. It talks to an app on this machine only (loopback), sends at most 5,000 searches, and stops
by itself after ``--time-limit`` seconds whatever is still out.

The key of ``--api-key`` (default: the ENGRAM_API_KEY of this shell) goes in every request as
``Authorization: Bearer <key>``, so the same run works against an app that requires one.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import multiprocessing
import os
import time
from collections import Counter
from dataclasses import dataclass
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from shared.settings import get_settings

LOOPBACK = {"127.0.0.1", "localhost", "::1"}
MAX_SEARCHES = 5000
QUERIES = Path(__file__).resolve().parents[1] / "sample-queries.txt"


@dataclass(frozen=True)
class Answer:
    status: int  # 0: no HTTP answer (refused, reset, cut off by the time limit)
    seconds: float


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile (``share`` in 0..1) of a non-empty list."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def loopback_url(url: str) -> str:
    host = urlsplit(url).hostname
    if host not in LOOPBACK:
        raise argparse.ArgumentTypeError(f"{url}: this benchmark runs against 127.0.0.1 only")
    return url.rstrip("/")


def bounded_count(text: str) -> int:
    count = int(text)
    if not 1 <= count <= MAX_SEARCHES:
        raise argparse.ArgumentTypeError(f"between 1 and {MAX_SEARCHES}")
    return count


async def search(client: httpx.AsyncClient, body: dict[str, object]) -> Answer:
    started = time.perf_counter()
    try:
        response = await client.post("/api/memory/semantic-search", json=body)
    except httpx.HTTPError:
        return Answer(0, time.perf_counter() - started)
    return Answer(response.status_code, time.perf_counter() - started)


async def fire(job: Job) -> list[Answer]:
    """One client's share of the searches, all sent at ``job.start_at``."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(
        base_url=job.url, headers=job.headers, limits=limits, timeout=job.time_limit
    ) as client:
        await asyncio.sleep(max(0.0, job.start_at - time.time()))
        tasks = [asyncio.create_task(search(client, body)) for body in job.bodies]
        _, late = await asyncio.wait(tasks, timeout=job.time_limit)
        for task in late:  # past the time limit: dropped, counted as no answer
            task.cancel()
        return [Answer(0, job.time_limit) if task in late else task.result() for task in tasks]


@dataclass(frozen=True)
class Job:
    url: str
    headers: dict[str, str]
    bodies: list[dict[str, object]]
    start_at: float  # time.time()
    time_limit: float


def client_process(job: Job, out: Queue[list[Answer]]) -> None:
    out.put(asyncio.run(fire(job)))


def health_process(url: str, headers: dict[str, str], stop: Event, out: Queue[list[Answer]]) -> None:
    """Calls /healthz, one call after another, until told to stop: in a process of its own, so
    its figures are the app's, not those of a client loop busy with hundreds of searches."""
    answers: list[Answer] = []
    with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
        while not stop.is_set():
            started = time.perf_counter()
            try:
                status = client.get("/healthz").status_code
            except httpx.HTTPError:
                status = 0
            answers.append(Answer(status, time.perf_counter() - started))
            stop.wait(0.05)
    out.put(answers)


def run(args: argparse.Namespace, queries: list[str]) -> tuple[list[Answer], list[Answer], float]:
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    httpx.get(f"{args.url}/healthz", headers=headers, timeout=10).raise_for_status()  # it is up
    bodies: list[dict[str, object]] = [
        {"query": queries[i % len(queries)], "user_id": args.user, "top_k": args.top_k}
        for i in range(args.searches)
    ]
    start_at = time.time() + 2.0  # every client process is ready by then
    results: Queue[list[Answer]] = multiprocessing.Queue()
    clients = [
        multiprocessing.Process(
            target=client_process,
            args=(Job(args.url, headers, bodies[i :: args.clients], start_at, args.time_limit), results),
        )
        for i in range(args.clients)
    ]
    stop = multiprocessing.Event()
    health: Queue[list[Answer]] = multiprocessing.Queue()
    prober = multiprocessing.Process(target=health_process, args=(args.url, headers, stop, health))
    for process in [prober, *clients]:
        process.start()
    answers = [a for _ in clients for a in results.get(timeout=args.time_limit + 60)]
    elapsed = time.time() - start_at
    stop.set()
    probed = health.get(timeout=60)
    for process in [prober, *clients]:
        process.join(timeout=10)
    return answers, probed, elapsed


def report(searches: list[Answer], health: list[Answer], elapsed: float, args: argparse.Namespace) -> None:
    latencies = [a.seconds for a in searches]
    statuses = Counter(a.status for a in searches)
    ok = sum(n for status, n in statuses.items() if 200 <= status < 300)
    other = {s: n for s, n in sorted(statuses.items()) if not (200 <= s < 300 or s == 504)}
    print(f"{len(searches)} searches at once to {args.url} (tenant {args.user!r}), over in {elapsed:.1f} s")
    print(
        f"search latency: p50 {percentile(latencies, 0.5):.3f} s, p99 {percentile(latencies, 0.99):.3f} s, "
        f"max {max(latencies):.3f} s"
    )
    named = ", ".join(f"{status or 'no answer'}: {n}" for status, n in other.items()) or "none"
    print(f"answers: 2xx {ok}, 504 {statuses.get(504, 0)}, other {sum(other.values())} ({named})")
    if health:
        times = [a.seconds for a in health]
        bad = sum(1 for a in health if a.status != 200)
        print(
            f"/healthz during the load: {len(health)} calls, p99 {percentile(times, 0.99):.3f} s, "
            f"max {max(times):.3f} s, not 200: {bad}"
        )


def main() -> None:
    settings = get_settings()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", type=loopback_url, default=f"http://127.0.0.1:{settings.api_port}")
    parser.add_argument("--searches", type=bounded_count, default=400, help=f"at most {MAX_SEARCHES}")
    parser.add_argument("--user", default="bench", help="the tenant searched")
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument(
        "--clients",
        type=int,
        default=4,
        choices=range(1, 17),
        metavar="1-16",
        help="client processes sharing the searches (one loop of 400 connections slows the client)",
    )
    parser.add_argument(
        "--time-limit", type=float, default=120.0, help="seconds after which whatever is out is dropped"
    )
    # A client-side option, read from this shell as any client would (not an app setting).
    parser.add_argument(
        "--api-key", default=os.environ.get("ENGRAM_API_KEY"), help="sent as Authorization: Bearer"
    )
    args = parser.parse_args()
    queries = [line.strip() for line in QUERIES.read_text().splitlines() if line.strip()]
    searches, health, elapsed = run(args, queries or ["what did I say about peanuts"])
    report(searches, health, elapsed, args)


if __name__ == "__main__":
    main()
