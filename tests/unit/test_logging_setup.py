"""shared/logging_setup.py: one JSON object a line, a task's ids on its lines, nothing a caller put
on a record with ``extra=`` (Celery's failure line carries the task's arguments there)."""

from __future__ import annotations

import io
import json
import logging
import logging.config
from collections.abc import Iterator
from typing import Any

import pytest

from shared import logging_setup
from shared.settings import Settings
from workers.observe import about


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    stream = io.StringIO()
    logging_setup.configure("json", logging.INFO, stream)
    yield stream
    logging_setup.clear_task()
    root.handlers, root.level = saved[0], saved[1]
    logging.captureWarnings(False)


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_every_line_is_one_json_object_with_the_tasks_ids(captured: io.StringIO) -> None:
    # Given a task about one document of one tenant
    logging_setup.bind_task("t-1", "engram.ingest.chunk_documents", "chunk", ["alice"], [("key-1", 3)])
    # When Celery logs its lines (one with the task's arguments as extra data, and a traceback)
    log = logging.getLogger("celery.app.trace")
    log.info("Task %s[%s] succeeded in %ss", "engram.ingest.chunk_documents", "t-1", 0.5)
    try:
        raise ValueError("boom\nsecond line")
    except ValueError:
        log.error("Task failed", exc_info=True, extra={"data": {"args": "THE DOCUMENT TEXT"}})
    logging_setup.clear_task()
    logging.getLogger("other").warning("after the task")

    # Then each is one JSON line with the ids, and the arguments are nowhere
    parsed = lines(captured)
    assert len(parsed) == 3
    first = parsed[0]
    assert first["event"] == "Task engram.ingest.chunk_documents[t-1] succeeded in 0.5s"
    assert (first["task_id"], first["stage"], first["tenant"]) == ("t-1", "chunk", "alice")
    assert (first["document"], first["version"]) == ("key-1", 3)
    assert first["level"] == "info" and first["logger"] == "celery.app.trace" and "timestamp" in first
    assert parsed[1]["exception"][0]["exc_type"] == "ValueError"
    assert "THE DOCUMENT TEXT" not in captured.getvalue()
    assert "task_id" not in parsed[2]


def test_a_batch_names_its_count_and_first_keys(captured: io.StringIO) -> None:
    documents = [(f"key-{i}", 1) for i in range(30)]
    logging_setup.bind_task("t-2", "engram.embed.embed_batch", "embed", [], documents)
    logging.getLogger("x").info("embedding")
    (line,) = lines(captured)
    assert line["documents"] == 30
    assert line["document_keys"] == [f"key-{i}" for i in range(logging_setup.BATCH_SHOWN)]
    assert "tenant" not in line


def test_a_task_message_is_read_for_ids_never_for_text() -> None:
    text = "A confidential paragraph"
    chunk = [{"user_id": "alice", "id": "doc-1", "text": text, "version": 4}]
    tenants, documents = about("engram.ingest.chunk_documents", (chunk,), {})
    assert tenants == ["alice"]
    assert len(documents) == 1 and documents[0][1] == 4 and text not in repr(documents)
    search = {"user_id": "bob", "query": "what did I say"}
    assert about("engram.query.search", (search,), {}) == (["bob"], [])
    assert about("engram.write.sync_memories", (["m-1", "m-2"],), {}) == ([], [])


def test_services_default_to_json_and_the_cli_to_pythons_own() -> None:
    unset = Settings(_env_file=None)
    assert logging_setup.resolved_format(unset, service=True) == "json"
    assert logging_setup.resolved_format(unset, service=False) is None
    text = Settings(_env_file=None, log_format="text")
    assert logging_setup.resolved_format(text, service=True) == "text"
    assert logging_setup.resolved_format(text, service=False) == "text"


def test_uvicorns_configuration_loads_and_redacts_query_strings() -> None:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        logging.config.dictConfig(logging_setup.uvicorn_config("json"))
        access = logging.getLogger("uvicorn.access")
        stream = io.StringIO()
        access.handlers[0].setStream(stream)  # type: ignore[attr-defined]
        access.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5", "GET", "/api/x?api_key=SECRET", "1.1", 200)
        (line,) = [json.loads(raw) for raw in stream.getvalue().splitlines()]
        assert line["logger"] == "uvicorn.access"
        assert "SECRET" not in line["event"] and "/api/x?<query redacted>" in line["event"]
    finally:
        root.handlers, root.level = saved
        for name in ("uvicorn", "uvicorn.access", "uvicorn.error"):
            logging.getLogger(name).handlers = []


def test_text_is_for_people_with_the_same_ids() -> None:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    stream = io.StringIO()
    try:
        logging_setup.configure("text", logging.INFO, stream)
        logging_setup.bind_task("t-3", "engram.write.write_batch", "write", [], [("key-9", 2)])
        logging.getLogger("celery.app.trace").info("Task %s succeeded", "t-3")
    finally:
        logging_setup.clear_task()
        root.handlers, root.level = saved
        logging.captureWarnings(False)
    (line,) = stream.getvalue().splitlines()
    assert line.split()[1:] and "Task t-3 succeeded" in line
    assert "task_id=t-3" in line and "stage=write" in line and "document=key-9" in line
    assert not line.startswith("{")


KEY = "egk_0123456789abcdef_" + "S3cr3t-" * 6 + "x"
COOKIE_VALUE = "eyJ0ZW5hbnQiOiJhbGljZSJ9.Zm9vYmFy.c2lnbmF0dXJl"


def _an_app_failing_with_a_request_in_hand() -> None:
    scope = {  # an ASGI scope, as every frame of the app's stack holds one
        "type": "http",
        "headers": [
            (b"authorization", f"Bearer {KEY}".encode()),
            (b"cookie", f"engram_ui={COOKIE_VALUE}".encode()),
            (b"x-api-key", KEY.encode()),
        ],
    }
    raise OverflowError(f"date value out of range ({len(scope)})")


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_a_logged_traceback_shows_no_local_variable_and_no_credential(
    fmt: logging_setup.Format,
) -> None:
    # Given the app's log
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    stream = io.StringIO()
    logging_setup.configure(fmt, logging.INFO, stream)
    try:
        # When a request fails with its key and cookie in a local variable, and a line names both
        try:
            _an_app_failing_with_a_request_in_hand()
        except OverflowError:
            logging.getLogger("producers.http.app").exception("Exception in ASGI application")
        logging.getLogger("other").warning("sent: Bearer %s with engram_ui=%s", KEY, COOKIE_VALUE)
        logging.getLogger("other").warning("headers: Authorization: Bearer %s; Cookie: x", KEY)
    finally:
        root.handlers, root.level = saved[0], saved[1]
        logging.captureWarnings(False)
    written = stream.getvalue()

    # Then the traceback is there, without the frame's variables, and neither secret is anywhere
    assert "OverflowError" in written and "_an_app_failing_with_a_request_in_hand" in written
    assert "S3cr3t" not in written and COOKIE_VALUE not in written, written
    assert "<redacted>" in written
    if fmt == "json":
        frames = json.loads(written.splitlines()[0])["exception"][0]["frames"]
        assert frames and all("locals" not in frame for frame in frames)
