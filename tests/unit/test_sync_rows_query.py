"""The sync's read-back names every field of a Memory: it reads them one by one, not all."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from shared.models import Memory, utc_from_micros
from shared.stores.neo4j.sync_queries import SYNC_ROWS


def test_the_read_back_names_every_field_a_memory_has() -> None:
    projection = SYNC_ROWS.split("m {", 1)[1].split("} AS memory", 1)[0]
    named = set(re.findall(r"\.(\w+)", projection)) | set(re.findall(r"(\w+):", projection))
    moments = {"created_at"}  # read as created_at_us
    assert set(Memory.model_fields) - moments <= named
    assert {f"{name}_us" for name in moments} <= named
    assert "embedding" in named


def test_epoch_microseconds_read_back_as_the_moment_they_were() -> None:
    moment = datetime(2024, 2, 29, 23, 59, 58, 123456, tzinfo=UTC)
    micros = int(moment.timestamp()) * 1_000_000 + moment.microsecond
    assert utc_from_micros(micros) == moment
    assert utc_from_micros(micros).isoformat() == "2024-02-29T23:59:58.123456+00:00"
    assert utc_from_micros(-1) == datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
