"""Tenants that read as another, ASCII name are refused unless allowed (issue 25, finding 7)."""

from __future__ import annotations

import pytest

from shared.confusables import ascii_reading, refuse_look_alike
from shared.errors import InvalidInput


@pytest.mark.parametrize(
    ("name", "reads_as"),
    [
        ("\u0430lice", "alice"),
        ("\uff41lice", "alice"),
        ("\u0455\u0435\u0430", "sea"),
        ("t\u0435nant-1", "tenant-1"),
    ],
)
def test_a_name_posing_as_ascii_reads_as_it_and_is_refused(name: str, reads_as: str) -> None:
    assert ascii_reading(name) == reads_as
    with pytest.raises(InvalidInput, match="ENGRAM_ALLOW_LOOKALIKE_TENANTS"):
        refuse_look_alike(name, allowed=False)
    refuse_look_alike(name, allowed=True)  # the setting takes it


@pytest.mark.parametrize(
    "name",
    ["alice", "tenant-1", "caf\u00e9", "m\u00fcller", "\u0430\u043b\u0438\u0441\u0430", "\u5f20\u4e09"],
)
def test_names_of_their_own_script_are_taken(name: str) -> None:
    assert ascii_reading(name) is None
    refuse_look_alike(name, allowed=False)
