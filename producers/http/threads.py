"""Costly work of a request (parsing and validating a large body) on worker threads, so the
event loop keeps answering other requests, ``/healthz`` too, meanwhile."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread

R = TypeVar("R")

# A body up to this size is parsed and validated on the event loop (a few milliseconds at
# worst); a thread would only delay it.
INLINE_BYTES = 64 * 1024
# Bodies handled at once on worker threads in one process: the rest wait their turn, and the
# shared thread pool of the routes' blocking calls is left to them.
THREADS = 2

_limiters: dict[asyncio.AbstractEventLoop, anyio.CapacityLimiter] = {}


async def off_the_loop(function: Callable[..., R], *args: Any) -> R:
    """``function(*args)`` on a worker thread, at most ``THREADS`` at once in this event loop."""
    loop = asyncio.get_running_loop()
    limiter = _limiters.get(loop)
    if limiter is None:
        limiter = _limiters[loop] = anyio.CapacityLimiter(THREADS)
    return await anyio.to_thread.run_sync(function, *args, limiter=limiter)
