"""The status page's sign-in token (producers/http/ui/session.py): it names the key's identity, is
signed, and expires."""

from __future__ import annotations

import time
from pathlib import Path

from producers.http.ui.session import SESSION_KEY_FILE, Sessions
from shared.settings import Settings


def test_a_token_reads_back_as_the_session_it_was_made_for() -> None:
    sessions = Sessions("a secret", max_age_s=60)

    session, token = sessions.start("0123456789abcdef", "alice")

    read = sessions.read(token)
    assert read == session and read is not None
    assert (read.key_id, read.tenant, read.admin) == ("0123456789abcdef", "alice", False)
    assert read.csrf_matches(session.csrf) and not read.csrf_matches("other") and not read.csrf_matches(None)
    # An admin key's session names no tenant
    admin, token = sessions.start("fedcba9876543210", None)
    assert sessions.read(token) == admin and admin.admin


def test_each_sign_in_gets_its_own_csrf_token() -> None:
    sessions = Sessions("a secret", max_age_s=60)
    first, _ = sessions.start("0123456789abcdef", "alice")
    second, _ = sessions.start("0123456789abcdef", "alice")
    assert first.csrf != second.csrf and len(first.csrf) >= 32


def test_an_altered_foreign_or_empty_token_names_no_one() -> None:
    sessions = Sessions("a secret", max_age_s=60)
    _, token = sessions.start("0123456789abcdef", "alice")
    payload, _, signature = token.rpartition(".")

    assert sessions.read(payload + "." + signature[::-1]) is None
    assert sessions.read(token.replace(token[2], "A" if token[2] != "A" else "B", 1)) is None
    assert Sessions("another secret", max_age_s=60).read(token) is None
    assert sessions.read("") is None and sessions.read(None) is None and sessions.read("garbage") is None


def test_a_token_past_its_age_names_no_one() -> None:
    sessions = Sessions("a secret", max_age_s=1)
    _, token = sessions.start("0123456789abcdef", "alice")
    time.sleep(2.1)
    assert sessions.read(token) is None


def test_the_secret_is_made_once_in_the_data_folder_when_none_is_set(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, _env_file=None)  # type: ignore[call-arg]
    _, token = Sessions.of(settings).start("0123456789abcdef", None)

    key_file = tmp_path / "secrets" / SESSION_KEY_FILE
    assert key_file.stat().st_mode & 0o077 == 0
    # Another process (made from the same settings) reads the same secret, so the token holds
    assert Sessions.of(settings).read(token) is not None
    # A set ENGRAM_UI_SESSION_KEY is used instead, so a token of the file's secret does not hold
    other = Settings(data_dir=tmp_path, ui_session_key="set", _env_file=None)  # type: ignore[call-arg]
    assert Sessions.of(other).read(token) is None


def test_a_notice_is_shown_only_as_the_server_signed_it() -> None:
    sessions = Sessions("a-secret-of-the-test", 3600)
    token = sessions.notice("doc-1: re-sent to the write stage")
    assert sessions.read_notice(token) == "doc-1: re-sent to the write stage"
    assert sessions.read_notice("<b>bold</b>") is None
    # (a character inside the signature: the last ones of base64 carry padding bits, and "xx"
    # over two that already read so decoded to the same signature now and then)
    other = "A" if token[-5] != "A" else "B"
    assert sessions.read_notice(token[:-5] + other + token[-4:]) is None
    assert Sessions("another-secret", 3600).read_notice(token) is None
    # and a session token is no notice (another salt)
    _, session_token = sessions.start("k", None)
    assert sessions.read_notice(session_token) is None


def test_a_signed_out_session_is_ended_wherever_its_cookie_is() -> None:
    import fakeredis

    from producers.http.ui.session import SignOuts

    sessions, outs = Sessions("a-secret-of-the-test", 3600), SignOuts(fakeredis.FakeRedis())
    session, token = sessions.start("k", "alice")
    other, _ = sessions.start("k", "alice")
    outs.end(session, 3600)
    read = sessions.read(token)
    assert read is not None and outs.ended(read) and not outs.ended(other)
