"""The status page under load: parallel ``GET /ui`` of a signed-in admin, and another tenant's
``GET /api/memories`` and ``/healthz`` timed meanwhile (issue 25, finding 6).

    .venv/bin/python ops/bench/ui_load.py --admin-key "$ADMIN_KEY" --tenant-key "$KEY"
    .venv/bin/python ops/bench/ui_load.py --url http://127.0.0.1:8031 --loads 16 --rounds 5 ...

Signs in once as the admin (``POST /ui/signin``, as the form does), then times the other tenant's
``/api/memories`` and ``/healthz`` alone (``--idle`` calls each), then sends ``--loads`` page loads
at the same moment, ``--rounds`` times, while one loop calls ``/api/memories`` and ``/healthz``
one after the other. Prints p50/p99/max of each, and any status other than 200. Loopback only.

Before (issue 25, finding 6: every load scanned the failures and read the store): /ui p50 7.3 s
for 16 parallel loads, /api/memories 0.05 -> 1.4 s, /healthz 1.1-1.5 s.

After (failures read from their index, the store's readings cached), 2026-11-26 on the shared
2-core machine at load 15-17 (other checkouts' tests), ``engram serve`` as ops/ runs it (one app
process under supervisord), three tenants of ops/sample (55 documents each) and 30 documents
recorded failed (``shared.progress``, as a stage records them), the admin's page showing every
tenant (60 failure rows); two runs of 16 loads x 5 rounds:

    /ui (16 parallel)  p50 767 / 561 ms    p99 1,368 / 1,259 ms
    /api/memories      alone p50 154 / 126 ms, during the loads p50 400 / 359, p99 610 / 588 ms
    /healthz           alone p50 27 / 20 ms,   during the loads p50 170 / 162, p99 426 / 292 ms

(each alone p99, 0.2-1.5 s, is the machine's noise: one call in twenty met another checkout's burst).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import time
from collections import Counter
from urllib.parse import urlsplit

import httpx

from shared.settings import get_settings

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile (``share`` in 0..1) of a non-empty list."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def loopback_url(url: str) -> str:
    if urlsplit(url).hostname not in LOOPBACK:
        raise argparse.ArgumentTypeError(f"{url}: this benchmark runs against 127.0.0.1 only")
    return url.rstrip("/")


class Timings:
    """Seconds of each 200, and a count of every other status, per route."""

    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = {}
        self.other: Counter[tuple[str, int]] = Counter()

    async def time(self, client: httpx.AsyncClient, route: str, **kwargs: object) -> None:
        started = time.perf_counter()
        answer = await client.get(route, **kwargs)  # type: ignore[arg-type]
        if answer.status_code == 200:
            self.seconds.setdefault(route, []).append(time.perf_counter() - started)
        else:
            self.other[(route, answer.status_code)] += 1

    def report(self, title: str) -> None:
        print(title)
        for route, seconds in self.seconds.items():
            print(
                f"  {route:<14} n={len(seconds):<4} p50 {percentile(seconds, 0.5) * 1000:7.0f} ms"
                f"  p99 {percentile(seconds, 0.99) * 1000:7.0f} ms  max {max(seconds) * 1000:7.0f} ms"
            )
        for (route, status), count in sorted(self.other.items()):
            print(f"  {route:<14} {count} answers {status}")


async def sign_in(client: httpx.AsyncClient, url: str, admin_key: str) -> None:
    answer = await client.post("/ui/signin", data={"key": admin_key}, headers={"Origin": url})
    if answer.status_code != 303 or not client.cookies:
        raise SystemExit(f"sign-in failed: {answer.status_code} {answer.text[:200]}")


async def probe(client: httpx.AsyncClient, timings: Timings, stop: asyncio.Event | None, calls: int) -> None:
    """``/api/memories`` then ``/healthz``, one after the other: ``calls`` times, or until ``stop``."""
    done = 0
    while (stop is None and done < calls) or (stop is not None and not stop.is_set()):
        await timings.time(client, "/api/memories", params={"limit": 20})
        await timings.time(client, "/healthz")
        done += 1


async def run(args: argparse.Namespace) -> None:
    limits = httpx.Limits(max_connections=args.loads + 4)
    timeout = httpx.Timeout(120)
    async with (
        httpx.AsyncClient(base_url=args.url, timeout=timeout, limits=limits) as admin,
        httpx.AsyncClient(
            base_url=args.url, timeout=timeout, headers={"Authorization": f"Bearer {args.tenant_key}"}
        ) as tenant,
    ):
        await sign_in(admin, args.url, args.admin_key)
        await Timings().time(admin, "/ui")  # the first load fills the caches, as any visit after
        idle = Timings()
        await probe(tenant, idle, None, args.idle)
        idle.report(f"another tenant alone ({args.idle} calls each):")

        loaded, stop = Timings(), asyncio.Event()
        prober = asyncio.ensure_future(probe(tenant, loaded, stop, 0))
        for _ in range(args.rounds):
            await asyncio.gather(*(loaded.time(admin, "/ui") for _ in range(args.loads)))
        stop.set()
        await prober
        loaded.report(f"{args.loads} parallel /ui loads x {args.rounds} rounds, another tenant meanwhile:")


def main() -> None:
    settings = get_settings()
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--url", type=loopback_url, default=f"http://127.0.0.1:{settings.api_port}")
    parser.add_argument("--admin-key", default=os.environ.get("ENGRAM_ADMIN_KEY", ""), help="an admin key")
    parser.add_argument(
        "--tenant-key", default=os.environ.get("ENGRAM_API_KEY", ""), help="another tenant's key"
    )
    parser.add_argument("--loads", type=int, default=16, help="page loads at the same moment")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--idle", type=int, default=20, help="calls of each route before the load")
    args = parser.parse_args()
    if not args.admin_key or not args.tenant_key:
        parser.error("--admin-key and --tenant-key (or ENGRAM_ADMIN_KEY and ENGRAM_API_KEY) are needed")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
