"""The version clock on fakeredis, and the ids of documents posted without one."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import pairwise

import fakeredis

from shared.models import DocumentIn
from shared.versions import VersionClock


def test_versions_are_strictly_increasing_even_when_asked_for_fast() -> None:
    # Given one clock over Redis
    clock = VersionClock(fakeredis.FakeRedis())

    # When versions are asked for as fast as possible, many within one microsecond
    versions = [clock.next() for _ in range(2000)]

    # Then each is greater than the one before
    assert all(b > a for a, b in pairwise(versions))


def test_two_producers_share_one_sequence() -> None:
    redis = fakeredis.FakeRedis()
    one, two = VersionClock(redis), VersionClock(redis)

    versions = [clock.next() for _ in range(500) for clock in (one, two)]

    assert all(b > a for a, b in pairwise(versions))


def test_versions_are_microseconds_of_redis_time() -> None:
    before = int(datetime.now(UTC).timestamp() * 1_000_000)

    version = VersionClock(fakeredis.FakeRedis()).next()

    assert before - 5_000_000 <= version <= int(datetime.now(UTC).timestamp() * 1_000_000) + 5_000_000


def test_a_clock_behind_the_last_version_still_counts_up() -> None:
    # Given a last version handed out far in the future (a Redis whose clock stepped back)
    redis = fakeredis.FakeRedis()
    ahead = int(datetime(2100, 1, 1, tzinfo=UTC).timestamp() * 1_000_000)
    redis.set("engram:version", str(ahead))

    # When versions are asked for
    clock = VersionClock(redis)
    first, second = clock.next(), clock.next()

    # Then they go on from it
    assert (first, second) == (ahead + 1, ahead + 2)


# The id of a document posted without one.


def _turn(**fields: object) -> DocumentIn:
    return DocumentIn.model_validate({"user_id": "alice", "text": "ok", **fields})


def test_the_same_text_in_two_sessions_is_two_documents() -> None:
    assert _turn(session_id="s1").document_id != _turn(session_id="s2").document_id


def test_the_same_text_session_and_time_is_one_document() -> None:
    said = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)

    first = _turn(session_id="s1", created_at=said)
    again = _turn(session_id="s1", created_at=said)

    assert first.document_id == again.document_id
    assert first.document_id.startswith("sha256-")


def test_the_same_text_in_one_session_at_two_times_is_two_documents() -> None:
    first = _turn(session_id="s1", created_at=datetime(2026, 3, 1, 9, 30, tzinfo=UTC))
    later = _turn(session_id="s1", created_at=datetime(2026, 3, 1, 9, 31, tzinfo=UTC))

    assert first.document_id != later.document_id


def test_a_naive_time_is_the_same_moment_as_utc() -> None:
    naive = _turn(session_id="s1", created_at=datetime(2026, 3, 1, 9, 30))
    aware = _turn(session_id="s1", created_at=datetime(2026, 3, 1, 9, 30, tzinfo=UTC))

    assert naive.document_id == aware.document_id


def test_session_and_project_are_not_interchangeable() -> None:
    assert _turn(session_id="x").document_id != _turn(project_id="x").document_id


def test_a_given_id_wins_over_the_derived_one() -> None:
    assert _turn(id="mine", session_id="s1").document_id == "mine"


def test_different_texts_never_share_a_derived_id() -> None:
    # Given a text that spells out another turn's text and context with the separator (U+001F),
    # which DocumentIn lets through in text
    plain = _turn(text="ok", session_id="s1", project_id="p1")
    crafted = _turn(text="ok\x1fs1\x1fp1\x1f")

    # Then they are still two documents (fails today: a text with no context is hashed bare, so
    # it collides with a shorter text plus context joined by the same separator)
    assert crafted.text != plain.text
    assert crafted.document_id != plain.document_id
