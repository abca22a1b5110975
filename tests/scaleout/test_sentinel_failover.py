"""The primary Redis is SIGKILLed mid-ingest: the Sentinels promote the replica, the workers and the
producer carry on through them, every accepted document ends done, 0 duplicated, Neo4j and Qdrant
in parity (issue 27 part 4).

Measured and written to the test data folder's logs/sentinel-failover.json: the seconds until the Sentinels name the
replica primary, the seconds until the first document is done after the kill, and what
asynchronous replication lost: a probe writes numbered keys to the primary as fast as it answers,
and the keys it acknowledged that the promoted replica never received are counted; for Engram's
own data, the stage messages the reconciler's pass sent again from the ledger (shared/ledger.py)
are what the ledger recovered.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from shared.errors import ServiceUnavailable
from shared.ids import document_key
from shared.models import DocumentIn
from tests.faults.parity import check
from tests.faults.stack import wait_for
from tests.faults.trial import Context, Options, Trial, opened
from tests.scaleout.sentinel_stack import SentinelStack

pytestmark = [pytest.mark.integration, pytest.mark.faults]

DOCS = 120
OPTIONS = Options(docs=DOCS, repair_timeout_s=400, reconcile_timeout_s=240)


@pytest.fixture(scope="module")
def context() -> Iterator[Context]:
    data_dir = os.environ.get("ENGRAM_DATA_DIR", "")
    if "engram-test" not in data_dir:
        pytest.exit("the Sentinel fault row runs through ./ops/test, which gives it a folder of its own", 2)
    with opened(SentinelStack.from_env(Path(data_dir) / "sentinel"), OPTIONS) as context:
        yield context


class Probe:
    """Writes ``probe:<n>`` to one node, n = 1, 2, ..., and remembers the highest it acknowledged."""

    def __init__(self, node: redis.Redis) -> None:
        self._node = node
        self.acknowledged = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Probe:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            try:
                self._node.set(f"probe:{n + 1}", 1)
            except redis.RedisError:
                return  # the node is gone: what it acknowledged is counted
            n += 1
            self.acknowledged = n

    def lost_on(self, node: redis.Redis) -> int:
        """Acknowledged keys the node does not hold."""
        present = node.pipeline(transaction=False)
        for n in range(1, self.acknowledged + 1):
            present.exists(f"probe:{n}")
        return self.acknowledged - sum(int(found) for found in present.execute())


@dataclass(frozen=True, slots=True)
class Figures:
    documents: int
    promotion_s: float | None
    first_done_after_kill_s: float | None
    replica_lag_bytes_before_kill: int
    probe_acknowledged: int
    probe_lost: int
    ingest_refused_during_failover: int
    redelivered_from_ledger: int
    parity: str


def _refs(trial: Trial) -> list[tuple[str, int]]:
    """The documents sent so far, as the progress records know them."""
    return [(document_key(trial.user_id, d), trial._versions.get(d, 0)) for d in sorted(trial.sent_ids)]


def _replication_lag(primary: redis.Redis) -> int:
    info: dict[str, Any] = primary.info("replication")
    replica = info.get("slave0") or {}
    return int(info["master_repl_offset"]) - int(replica.get("offset", 0))


def _ingest_through_the_failover(trial: Trial, docs: list[DocumentIn]) -> int:
    """Sends the documents as a producer would, trying a refused batch again; returns the refusals."""
    refused = 0
    deadline = time.monotonic() + 120
    while True:
        try:
            trial.ingest(docs)
            return refused
        except ServiceUnavailable:
            refused += 1
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@pytest.mark.timeout(1800)  # two Neo4j starts and a loaded machine's writes
def test_a_primary_killed_mid_ingest_fails_over_and_every_document_ends_done(context: Context) -> None:
    stack = context.stack
    assert isinstance(stack, SentinelStack)
    trial = Trial(context, "sentinel-failover")
    first, second = trial.documents()[: DOCS // 2], trial.documents()[DOCS // 2 :]
    old_port = stack.primary_port()
    assert old_port is not None
    primary = stack.node(old_port)

    # Given half the documents accepted and the pipeline writing them, through the Sentinels
    trial.ingest(first)
    assert trial.wait_first_write(timeout_s=420)

    # When the primary is SIGKILLed while a probe writes to it and the rest is being sent
    with Probe(primary) as probe:
        time.sleep(0.3)
        lag = _replication_lag(primary)
        done_at_kill = context.client.states(_refs(trial))["done"]
        killed_at = time.monotonic()
        stack.kill9_primary()
        promotion_s = stack.wait_promotion(old_port)
    refusals: list[int] = []
    sender = threading.Thread(target=lambda: refusals.append(_ingest_through_the_failover(trial, second)))
    sender.start()
    first_done = wait_for(lambda: context.client.states(_refs(trial))["done"] > done_at_kill, 120, 0.05)
    first_done_s = time.monotonic() - killed_at if first_done else None
    sender.join(180)
    new_port = stack.primary_port()
    assert new_port is not None
    probe_lost = probe.lost_on(stack.node(new_port))

    # Then every accepted document ends done (the one reconcile pass sending again what the
    # ledger holds and the broker lost), nothing duplicated, both stores in parity
    unfinished = trial.settle()
    if unfinished:
        time.sleep(stack.settings.redeliver_after_s)
    report = trial.reconcile()
    if report.get("redelivered") or unfinished:  # sent again by this pass or the workers' own
        unfinished = trial.settle()
    parity = check(stack, trial.user_id, trial.expectation.memories(), trial.expectation.document_ids)
    figures = Figures(
        documents=trial.sent,
        promotion_s=round(promotion_s, 2) if promotion_s is not None else None,
        first_done_after_kill_s=round(first_done_s, 2) if first_done_s is not None else None,
        replica_lag_bytes_before_kill=lag,
        probe_acknowledged=probe.acknowledged,
        probe_lost=probe_lost,
        ingest_refused_during_failover=refusals[0] if refusals else -1,
        redelivered_from_ledger=int(report.get("redelivered", 0)),
        parity=parity.describe(),
    )
    figures_file = stack.settings.data_dir.parent / "logs" / "sentinel-failover.json"
    figures_file.parent.mkdir(exist_ok=True)
    figures_file.write_text(json.dumps(asdict(figures), indent=2) + "\n")
    print(f"\nsentinel failover: {json.dumps(asdict(figures))}\nnotes: {'; '.join(trial.notes)}")

    assert promotion_s is not None, "the Sentinels promoted no replica in 60 s"
    assert new_port != old_port
    assert first_done_s is not None, "no document was done in 120 s after the kill"
    assert refusals, "the second half was never accepted"
    assert unfinished == 0, "; ".join(trial.notes)
    assert (parity.ok, parity.lost, parity.duplicated) == (True, 0, 0), parity.describe()

    # And the killed node, started again, comes back as the new primary's replica
    stack.redis_start()
    old = stack.node(old_port)
    assert wait_for(lambda: old.role()[0] == b"slave", 30)
