"""The soak's schedule on its own: drawn from the seed alone, every kind of fault in it."""

from __future__ import annotations

from tests.faults.soak import KINDS, schedule


def test_the_same_seed_draws_the_same_schedule_and_another_seed_another() -> None:
    assert schedule(7, 4) == schedule(7, 4)
    assert schedule(7, 4) != schedule(8, 4)


def test_every_kind_of_fault_is_in_a_short_run_and_the_power_cut_in_its_first_half() -> None:
    for seed in range(1, 30):
        events = schedule(seed, 1.5)
        kinds = [e.kind for e in events]

        assert set(kinds) == set(KINDS) and kinds.count("power-cut") == 1
        assert kinds.index("power-cut") <= len(KINDS) // 2
        assert [e.at_s for e in events] == sorted(e.at_s for e in events)


def test_neo4j_stops_last_30_to_90_s_in_a_full_run_and_scale_down_in_a_short_one() -> None:
    full = [e.hold_s for s in range(1, 30) for e in schedule(s, 10) if e.kind == "neo4j-stop"]
    short = [e.hold_s for s in range(1, 30) for e in schedule(s, 2) if e.kind == "neo4j-stop"]

    assert full and all(30 <= hold <= 90 for hold in full)
    assert short and all(5 <= hold <= 18 for hold in short)
