"""Progress.failures: a tenant's newest failures from an index kept as records fail, never a scan."""

from __future__ import annotations

from typing import Any

import fakeredis

from shared.progress import Progress


class CountingRedis(fakeredis.FakeRedis):
    """Counts the scans it is asked for."""

    scans = 0

    def scan(self, *args: Any, **kwargs: Any) -> Any:
        type(self).scans += 1
        return super().scan(*args, **kwargs)


def named(progress: Progress, tenant: str, keys: list[str]) -> None:
    progress.name((key, tenant, f"doc-{key}", 1) for key in keys)


def test_a_tenant_s_failures_come_from_its_index_newest_first_without_a_scan() -> None:
    # Given many records of many tenants, a few of alice's failed, one failed then done
    client = CountingRedis()
    progress = Progress(client, 3600)
    progress.failures(None)  # the first read indexes earlier failures once (a scan of none)
    for t in range(20):
        keys = [f"t{t}-{i}" for i in range(50)]
        progress.set([(k, 1) for k in keys], "queued")
        named(progress, f"tenant-{t}", keys)
        progress.set([(k, 1) for k in keys], "done")
    alice = ["a-1", "a-2", "a-3"]
    progress.set([(k, 1) for k in alice], "queued")
    named(progress, "alice", alice)
    progress.set([("a-1", 1)], "failed", "write: boom")
    progress.set([("a-2", 1)], "failed", "embed: boom")
    progress.set([("a-3", 1)], "failed", "write: boom")
    progress.set([("a-3", 2)], "done")  # a newer version landed
    CountingRedis.scans = 0

    # When alice's and everyone's failures are read
    mine = progress.failures("alice")
    every = progress.failures(None)

    # Then they are alice's failed documents alone, read without a scan
    assert {r.document_id for r in mine} == {"doc-a-1", "doc-a-2"}
    assert all(r.user_id == "alice" and r.state == "failed" for r in mine)
    assert {r.document_id for r in every} == {"doc-a-1", "doc-a-2"}
    assert CountingRedis.scans == 0
    assert progress.failures("tenant-3") == []


def test_a_failure_before_the_record_is_named_is_indexed_when_named() -> None:
    progress = Progress(fakeredis.FakeRedis(), 3600)
    progress.set([("fast", 1)], "failed", "chunk: boom")  # a worker faster than its producer
    named(progress, "bob", ["fast"])
    assert [r.document_id for r in progress.failures("bob")] == ["doc-fast"]


def test_an_expired_record_leaves_the_index_when_read() -> None:
    client = fakeredis.FakeRedis()
    progress = Progress(client, 3600)
    named(progress, "carol", ["gone"])
    progress.set([("gone", 1)], "failed", "x")
    client.delete("engram:doc:gone")
    assert progress.failures("carol") == []
    assert client.zcard("engram:failed:t:carol") == 0


def test_failures_recorded_before_the_index_existed_are_indexed_once() -> None:
    # Given a failed record written as an older release wrote it (no index entry)
    client = fakeredis.FakeRedis()
    client.hset(
        "engram:doc:old",
        mapping={
            "state": "failed",
            "version": 1,
            "rank": 4,
            "updated_at": "2024-05-03T10:00:00+00:00",
            "user_id": "dora",
            "document_id": "old-doc",
        },
    )
    progress = Progress(client, 10**9)
    # Then the first read finds it, and later ones read the index
    assert [r.document_id for r in progress.failures("dora")] == ["old-doc"]
    assert client.exists("engram:failed-indexed")
