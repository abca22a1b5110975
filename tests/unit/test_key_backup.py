"""API keys travel with the backup (shared/services/key_backup.py) and the census tells a lost
primary at once (shared/services/census.py), over fakes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from shared.services import census, key_backup
from tests.unit.fakes import DIM, MODEL, FakeVectorSpace


class Keys:
    """ApiKey rows as Neo4j's RESTORE merges them: a kept key stays, a revocation is never undone."""

    def __init__(self, rows: list[dict[str, Any]] | None = None) -> None:
        self.rows = {row["id"]: dict(row) for row in rows or []}

    def key_rows(self) -> list[dict[str, Any]]:
        return [dict(row) for row in self.rows.values()]

    def restore_key_rows(self, rows: list[dict[str, Any]]) -> int:
        for row in rows:
            kept = self.rows.setdefault(row["id"], dict(row))
            kept["revoked_at"] = kept["revoked_at"] or row["revoked_at"]
        return len(rows)


def _key(key_id: str, revoked_at: str | None = None) -> dict[str, Any]:
    return {
        "id": key_id,
        "name": key_id,
        "scope": "tenant",
        "tenant": "alice",
        "secret_hash": f"hash-{key_id}",
        "signing_secret": f"sealed-{key_id}",
        "created_at": "2026-01-01T00:00:00Z",
        "revoked_at": revoked_at,
    }


class Kv:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def get(self, name: str) -> str | None:
        return self.values.get(name)

    def set(self, name: str, value: str) -> None:
        self.values[name] = value


def test_keys_come_back_as_hashes_and_sealed_secrets_and_a_revoked_key_stays_revoked() -> None:
    # Given a primary with a live and a revoked key, kept beside the collection
    store = FakeVectorSpace()(MODEL, DIM)
    primary = Keys([_key("live"), _key("gone", revoked_at="2026-02-01T00:00:00Z")])
    assert key_backup.back_up(primary, [store]) == 2

    # When the primary is lost, a key is made during the loss, and the keys are brought back
    wiped = Keys([_key("new")])
    brought = key_backup.bring_back(wiped, store.backed_up_keys())

    # Then both old keys are back as they were kept (no secret in clear), the new one is kept
    assert brought == 2
    assert wiped.rows["live"] == _key("live")
    assert wiped.rows["gone"]["revoked_at"] == "2026-02-01T00:00:00Z"
    assert set(wiped.rows) == {"live", "gone", "new"}


def test_a_revocation_made_in_the_primary_is_not_undone_by_the_backup() -> None:
    store = FakeVectorSpace()(MODEL, DIM)
    key_backup.back_up(Keys([_key("k")]), [store])
    primary = Keys([_key("k", revoked_at="2026-03-01T00:00:00Z")])

    key_backup.bring_back(primary, store.backed_up_keys())

    assert primary.rows["k"]["revoked_at"] == "2026-03-01T00:00:00Z"


def test_the_census_tells_a_wiped_or_replaced_primary_without_a_pass() -> None:
    # Given the census of a backup of 1,000 points in step with store A
    kv = Kv()
    census.save(kv, "engram_x_384", 1000, "store-a", datetime(2026, 1, 1, tzinfo=UTC))
    kept = census.load(kv)

    # Then a primary of 0 memories, or of another store id, looks lost; store A whole does not
    assert kept is not None and kept.points == 1000
    assert census.looks_lost(kept, 0, None, 0.5) is not None
    replaced = census.looks_lost(kept, 1000, "store-b", 0.5)
    assert replaced is not None and "store-a" in replaced and "engram restore" in replaced
    assert census.looks_lost(kept, 990, "store-a", 0.5) is None
    assert census.looks_lost(None, 0, None, 0.5) is None
