"""Latency summaries: nearest-rank percentiles of what was measured."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

T = TypeVar("T")


def percentile(values: Sequence[float], share: float) -> float:
    """Nearest-rank percentile (``share`` in 0..1) of a non-empty sequence."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


@dataclass(frozen=True, slots=True)
class Latency:
    n: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Latency:
        if not seconds:
            raise ValueError("no latency measured")
        ms = [s * 1000.0 for s in seconds]
        return cls(len(ms), percentile(ms, 0.5), percentile(ms, 0.95), percentile(ms, 0.99), max(ms))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def timed(call: Callable[[], T]) -> tuple[T, float]:
    """The call's result and its wall time in seconds."""
    started = time.perf_counter()
    result = call()
    return result, time.perf_counter() - started
