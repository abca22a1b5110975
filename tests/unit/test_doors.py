"""The connection gate and the reused /healthz reading, with fakes (the served app's tests are
tests/integration/test_served_doors.py)."""

from __future__ import annotations

from concurrent.futures import Executor, Future
from typing import Any, cast

from producers.http.connections import Gate, GatedHttpToolsProtocol
from producers.http.health import ServiceHealth
from producers.http.health_cache import Reused


class FakeConnection:
    def __init__(self, address: str) -> None:
        self.address = address
        self.counted = False
        self.evicted = False

    def evict(self) -> None:
        self.evicted = True


def _admit(gate: Gate, address: str) -> tuple[FakeConnection, str | None]:
    connection = FakeConnection(address)
    refused = gate.admit(cast(GatedHttpToolsProtocol, connection))
    connection.counted = refused is None
    return connection, refused


def test_a_client_past_its_bound_is_refused_and_others_are_taken() -> None:
    gate = Gate(cap=10, per_client=2)
    assert [_admit(gate, "a")[1] for _ in range(2)] == [None, None]
    assert "ENGRAM_API_MAX_CONNECTIONS_PER_CLIENT" in str(_admit(gate, "a")[1])
    assert _admit(gate, "b")[1] is None


def test_at_the_cap_the_oldest_idle_connection_makes_room_and_busy_ones_never_do() -> None:
    gate = Gate(cap=2, per_client=5)
    first, _ = _admit(gate, "a")
    second, _ = _admit(gate, "b")
    gate.busy(cast(GatedHttpToolsProtocol, second))
    third, refused = _admit(gate, "c")
    assert refused is None and first.evicted and not second.evicted
    gate.busy(cast(GatedHttpToolsProtocol, third))
    assert "ENGRAM_API_MAX_CONNECTIONS" in str(_admit(gate, "d")[1])  # every one busy: refused


class Inline(Executor):
    def __init__(self) -> None:
        self.submitted: list[Any] = []

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.submitted.append(fn)
        return Future()


def test_a_reading_is_reused_while_fresh_refreshed_behind_while_stale_and_awaited_past_it() -> None:
    now = [0.0]
    calls: list[float] = []

    def probe() -> ServiceHealth:
        calls.append(now[0])
        return ServiceHealth(status="up", detail=str(now[0]))

    executor = Inline()
    reused = Reused(probe, executor, fresh_s=2, stale_s=15, clock=lambda: now[0])
    assert reused().detail == "0.0" and calls == [0.0]
    now[0] = 1.0
    assert reused().detail == "0.0" and calls == [0.0] and not executor.submitted
    now[0] = 5.0
    assert reused().detail == "0.0" and len(executor.submitted) == 1  # stale: answered, refreshed behind
    executor.submitted[0]()
    assert reused().detail == "5.0"
    now[0] = 30.0
    assert reused().detail == "30.0" and calls == [0.0, 5.0, 30.0]  # too old: read again at once
