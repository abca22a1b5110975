"""Findings of the hostile-client review (issue 15), each against the real app and stack.

Each test failed before its fix: a 500 on input a client can send, a body read before its key
was known, credentials that could mean two callers, and edges that took what they should refuse.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from producers.http.app import app
from shared.auth import signature
from shared.settings import get_settings
from tests.integration.support import APP_URL, KeyMaker, signed_headers
from tests.integration.tenants import client_with

pytestmark = pytest.mark.integration


# Finding 3: 500s on input a client can send -------------------------------------------------


@pytest.mark.parametrize("timestamp", ["²", "¹²", "½", "+1", "1_0", "1" * 40])
def test_a_webhook_timestamp_that_is_no_ascii_number_is_a_401_not_a_500(
    api: TestClient, keys: KeyMaker, tenant: str, timestamp: str
) -> None:
    made = keys(tenant, signing=True)
    assert made.signing_secret is not None
    body = b'{"text": "never stored"}'
    response = client_with().post(
        "/api/documents",
        content=body,
        headers={
            "content-type": "application/json",
            "x-engram-key-id": made.info.id,
            # as the app reads a header (latin-1): "²" arrives as the byte 0xb2
            "x-engram-timestamp": timestamp.encode("utf-8")
            if timestamp.isascii()
            else timestamp.encode("latin-1", "replace"),  # type: ignore[dict-item]
            "x-engram-signature": signature(made.signing_secret, "1", body),
        },
    )
    assert response.status_code == 401, response.text


@pytest.mark.parametrize("name", ["tag", "memory_type"])
def test_too_many_list_filters_on_the_memory_listing_are_a_422_not_a_500(
    api: TestClient, keys: KeyMaker, tenant: str, name: str
) -> None:
    alice = client_with(keys(tenant).key)
    response = alice.get("/api/memories", params=[(name, f"v{i}") for i in range(33)])
    assert response.status_code == 422, response.text
    assert name in response.text
    # and 32 are still taken
    assert alice.get("/api/memories", params=[(name, f"v{i}") for i in range(32)]).status_code == 200


# Finding 1: validation cost bounded by the number of items, not by the errors ---------------


@pytest.mark.parametrize("shape", ["list", "batch"])
def test_a_million_empty_documents_are_refused_fast_with_a_small_answer(
    api: TestClient, keys: KeyMaker, tenant: str, shape: str
) -> None:
    alice = client_with(keys(tenant).key)
    items = "[" + ",".join(["{}"] * 1_000_000) + "]"
    body = items if shape == "list" else '{"documents": ' + items + "}"
    started = time.monotonic()
    response = alice.post("/api/documents", content=body, headers={"content-type": "application/json"})
    elapsed = time.monotonic() - started
    assert response.status_code == 422, response.text[:300]
    assert len(response.content) < 64_000
    assert elapsed < 10, elapsed
    assert "1000" in response.json()["detail"]


def test_a_validation_answer_lists_the_first_errors_and_counts_the_rest(
    api: TestClient, keys: KeyMaker, tenant: str
) -> None:
    alice = client_with(keys(tenant).key)
    response = alice.post("/api/documents", json=[{}] * 500)
    assert response.status_code == 422
    answer = response.json()
    assert len(answer["errors"]) <= 20
    assert "more" in answer["detail"]


def test_an_error_never_repeats_a_huge_key_of_the_caller(
    api: TestClient, keys: KeyMaker, tenant: str
) -> None:
    alice = client_with(keys(tenant).key)
    response = alice.post("/api/documents", json={"text": "hi", "metadata": {"k" * 1_000_000: 1}})
    assert response.status_code == 422
    assert len(response.content) < 16_000


def test_keys_past_a_model_cost_no_error_each(api: TestClient, keys: KeyMaker, tenant: str) -> None:
    # A million unknown keys in one document made a million errors: 12 MB, over a minute of work
    alice = client_with(keys(tenant).key)
    body = '{"text": "x", ' + ",".join(f'"k{i}": 0' for i in range(1_000_000)) + "}"
    started = time.monotonic()
    response = alice.post("/api/documents", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text[:300]
    assert "keys; the limit is" in response.json()["detail"]
    assert time.monotonic() - started < 10
    # The most a body may hold: every document of a batch with as many unknown keys as allowed
    from producers.http.wire import MAX_KEYS

    extra = {f"k{i}": 0 for i in range(MAX_KEYS - 1)}
    batch = [{"text": "x", **extra}] * get_settings().max_batch_documents
    started = time.monotonic()
    response = alice.post("/api/documents", json=batch)
    assert response.status_code == 422
    assert len(response.json()["errors"]) == 20
    assert time.monotonic() - started < 30


# Finding 2: nothing read before a key --------------------------------------------------------


def _signed_scope(key_id: str, timestamp: str) -> dict[str, Any]:
    headers = [
        (b"host", b"127.0.0.1"),
        (b"content-type", b"application/json"),
        (b"content-length", b"60000000"),
        (b"x-engram-key-id", key_id.encode()),
        (b"x-engram-timestamp", timestamp.encode()),
        (b"x-engram-signature", b"v1=" + b"0" * 64),
    ]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/api/documents",
        "raw_path": b"/api/documents",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


def _call_without_sending_the_body(scope: dict[str, Any]) -> tuple[int, int]:
    """The status the app answers and how many body messages it asked for (each 1 MB)."""
    asked = 0
    status = 0

    async def receive() -> dict[str, Any]:
        nonlocal asked
        asked += 1
        return {"type": "http.request", "body": b" " * 1_000_000, "more_body": True}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    asyncio.run(asyncio.wait_for(app(scope, receive, send), 30))
    return status, asked


def test_a_signed_request_of_an_unknown_key_is_refused_before_its_body_is_read(api: TestClient) -> None:
    status, asked = _call_without_sending_the_body(_signed_scope("0123456789abcdef", str(int(time.time()))))
    assert (status, asked) == (401, 0)
    status, asked = _call_without_sending_the_body(_signed_scope("nokey", str(int(time.time()))))
    assert (status, asked) == (401, 0)


def test_a_signed_request_of_a_key_without_signing_is_refused_before_its_body_is_read(
    api: TestClient, keys: KeyMaker, tenant: str
) -> None:
    plain = keys(tenant)
    status, asked = _call_without_sending_the_body(_signed_scope(plain.info.id, str(int(time.time()))))
    assert (status, asked) == (401, 0)


# Finding 7: one answer for every refused signature -------------------------------------------


def test_signed_webhook_refusals_do_not_tell_the_reason_apart(
    api: TestClient, keys: KeyMaker, tenant: str
) -> None:
    signing = keys(tenant, signing=True)
    plain = keys(tenant)
    body = b'{"text": "never stored"}'
    now = str(int(time.time()))
    details = set()
    for key_id, secret in (("0123456789abcdef", "x"), (plain.info.id, "x"), (signing.info.id, "wrong")):
        response = client_with().post(
            "/api/documents",
            content=body,
            headers={
                "content-type": "application/json",
                "x-engram-key-id": key_id,
                "x-engram-timestamp": now,
                "x-engram-signature": signature(secret, now, body),
            },
        )
        assert response.status_code == 401
        details.add(response.json()["detail"])
    assert len(details) == 1, details


def test_open_healthz_names_services_and_states_only_and_an_admin_sees_why(
    api: TestClient, keys: KeyMaker, tenant: str, settings: Any
) -> None:
    for anonymous_or_tenant in (client_with(), client_with(keys(tenant).key)):
        body = anonymous_or_tenant.get("/healthz").json()
        assert {body[name]["detail"] for name in ("redis", "neo4j", "qdrant", "workers")} == {""}
        assert str(settings.data_dir) not in json.dumps(body)
        assert "@" not in json.dumps(body)  # no worker host name
    admin = api.get("/healthz").json()
    assert admin["qdrant"]["detail"]  # the embedded folder, for an admin


# Finding 6: credentials that could mean two callers ------------------------------------------


def _raw_request(headers: list[tuple[str, str | bytes]]) -> Any:
    client = TestClient(app, base_url=APP_URL)
    return client.get("/api/status", headers=headers)  # type: ignore[arg-type]


def test_two_authorization_headers_are_refused(api: TestClient, keys: KeyMaker, tenant: str) -> None:
    alice, bob = keys(tenant), keys(tenant + "-b")
    response = _raw_request(
        [("authorization", f"Bearer {alice.key}"), ("authorization", f"Bearer {bob.key}")]
    )
    assert response.status_code == 400, response.text
    response = _raw_request([("x-api-key", alice.key), ("x-api-key", bob.key)])
    assert response.status_code == 400, response.text
    response = _raw_request([("authorization", f"Bearer {alice.key}"), ("x-api-key", bob.key)])
    assert response.status_code == 400, response.text
    # one of them alone is fine
    assert _raw_request([("authorization", f"Bearer {alice.key}")]).status_code == 200


@pytest.mark.parametrize("suffix", ["\u00a0", "\u2003", "\u200b", "\t\u00a0"])
def test_a_key_not_in_its_one_exact_form_is_refused(
    api: TestClient, keys: KeyMaker, tenant: str, suffix: str
) -> None:
    alice = keys(tenant)
    sent = alice.key + suffix
    try:  # the bytes a client sends: latin-1 where it can say it, as the app reads headers
        raw = sent.encode("latin-1")
    except UnicodeEncodeError:
        raw = sent.encode("utf-8")
    response = _raw_request([("x-api-key", raw)])
    assert response.status_code == 401


# Finding 8: looser edges ---------------------------------------------------------------------


@pytest.mark.parametrize("number", ["1e400", "-1e400", "1E999"])
def test_a_number_too_large_for_a_double_is_refused(
    api: TestClient, keys: KeyMaker, tenant: str, number: str
) -> None:
    alice = client_with(keys(tenant).key)
    body = '{"id": "big", "text": "hello", "metadata": {"n": ' + number + "}}"
    response = alice.post("/api/documents", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    assert alice.get("/api/documents/big").status_code == 404


@pytest.mark.parametrize(
    "host",
    [
        "localhost:8014, evil.example",
        "127.0.0.1:8014@evil.example",
        "localhost evil.example",
        "localhost:80:80",
        "localhost:99999",
        "localhost:",
        "[::1]evil",
        "localhost/evil",
    ],
)
def test_a_host_header_that_is_no_single_host_is_refused(api: TestClient, host: str) -> None:
    response = TestClient(app, base_url=APP_URL).get("/healthz", headers={"host": host})
    assert response.status_code == 400, (host, response.status_code)


@pytest.mark.parametrize("host", ["localhost", "localhost:8014", "127.0.0.1:1", "[::1]:8000", "LOCALHOST"])
def test_a_plain_allowed_host_is_still_served(api: TestClient, host: str) -> None:
    assert TestClient(app, base_url=APP_URL).get("/healthz", headers={"host": host}).status_code == 200


def test_json_loads_of_the_edge_gives_finite_numbers_only() -> None:
    from producers.http.wire import StrictJsonError, loads_strict

    with pytest.raises(StrictJsonError):
        loads_strict(json.dumps({"a": 1}).replace("1", "1e400"))


# Finding 4: a private data folder, logs without tenant text or credentials --------------------


def test_nothing_in_the_data_folder_is_readable_by_others(api: TestClient, settings: Any) -> None:
    import os
    import stat

    exposed = []
    for folder, names, files in os.walk(settings.data_dir):
        for name in [*names, *files]:
            path = os.path.join(folder, name)
            if not os.path.islink(path) and os.stat(path).st_mode & (stat.S_IRWXG | stat.S_IRWXO):
                exposed.append(path)
    assert exposed == [], exposed[:10]


def test_a_task_success_is_logged_without_its_result_and_a_path_without_its_query() -> None:
    import logging

    from celery.app import trace

    import workers.app  # noqa: F401  (the worker's app quiets its success line on import)
    from shared.log_privacy import RedactQuery

    assert "return_value" not in trace.LOG_SUCCESS
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        "",
        0,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", "/api/status?api_key=egk_secret", "1.1", 401),
        None,
    )
    assert RedactQuery().filter(record)
    assert "egk_secret" not in record.getMessage()
    assert "/api/status" in record.getMessage()


# Finding 8: tenant names that read alike ----------------------------------------------------


def test_a_tenant_confusable_with_an_existing_one_is_warned_and_refused_when_strict(
    api: TestClient, keys: KeyMaker, tenant: str
) -> None:
    import subprocess
    import sys
    from pathlib import Path

    from tests.integration.support import ROOT

    engram = str(Path(sys.executable).with_name("engram"))
    keys(f"a{tenant}")  # the existing tenant, in Latin letters
    lookalike = f"\u0430{tenant}"  # the same with a Cyrillic a

    def create(*extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        command = [engram, "keys", "create", "--tenant", lookalike, "--json", *extra]
        return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)

    # By default it is refused outright: it reads as an ASCII name it is not (issue 25)
    refused = create()
    assert refused.returncode != 0 and "ENGRAM_ALLOW_LOOKALIKE_TENANTS" in refused.stderr
    allowed = {**os.environ, "ENGRAM_ALLOW_LOOKALIKE_TENANTS": "true"}
    strict = create("--strict-tenants", env=allowed)
    assert strict.returncode != 0
    assert "confusable" in strict.stderr and f"a{tenant}" in strict.stderr
    warned = create(env=allowed)
    assert warned.returncode == 0, warned.stderr
    assert "warning" in warned.stderr
    assert json.loads(warned.stdout)["info"]["tenant"] == lookalike


# Finding 4: signing secrets sealed at rest, and rotated ---------------------------------------


def test_a_signing_secret_rests_sealed_in_neo4j_and_rotates(
    api: TestClient, keys: KeyMaker, tenant: str, neo4j_driver: Any
) -> None:
    from producers.client import EngramClient
    from producers.http.deps import authenticator
    from shared.sealing import SEALED

    # Given a signing key
    made = keys(tenant, signing=True)
    assert made.signing_secret is not None
    # Then what Neo4j holds is sealed: the store alone cannot sign
    with neo4j_driver.session() as session:
        stored = session.run(
            "MATCH (k:ApiKey {id: $id}) RETURN k.signing_secret AS s", id=made.info.id
        ).single()
    assert stored["s"].startswith(SEALED) and made.signing_secret not in stored["s"]

    def post(secret: str, text: str) -> int:
        body = json.dumps({"id": text, "text": text}).encode()
        headers = signed_headers(made.info.id, secret, body)
        return client_with().post("/api/documents", content=body, headers=headers).status_code

    # And the secret it was shown signs
    assert post(made.signing_secret, "before rotation") == 202
    # When it is rotated
    client = EngramClient()
    try:
        rotated = client.rotate_signing_secret(made.info.id)
    finally:
        client.close()
    authenticator().forget()
    # Then the old secret no longer signs and the new one does
    assert post(made.signing_secret, "old secret") == 401
    assert post(rotated, "after rotation") == 202


# Issue 25: look-alike tenants, and date entities -------------------------------------------


@pytest.mark.parametrize("posing", ["\u0430{t}", "\uff41{t}"])
def test_a_look_alike_tenant_is_refused_on_ingest_by_default(
    api: TestClient, tenant: str, posing: str
) -> None:
    # Given a tenant in ASCII, and a name that reads as it (a Cyrillic a, a fullwidth a)
    name = posing.format(t=tenant)
    # When an admin key ingests for the look-alike, in any form
    for body in ({"user_id": name, "text": "x"}, [{"json": {"user_id": name, "text": "x"}}]):
        answer = api.post("/api/documents", json=body)
        # Then it is a clear 422 that names the setting, and nothing is stored
        assert answer.status_code == 422, answer.text
        assert "reads as" in answer.text and "ENGRAM_ALLOW_LOOKALIKE_TENANTS" in answer.text
    assert api.get("/api/status", params={"user_id": name}).json()["documents"] == 0


def test_a_date_entity_is_reachable_by_the_name_it_is_listed_by(
    api: TestClient, keys: KeyMaker, tenant: str
) -> None:
    from tests.integration.support import wait_until_finished

    own = {"Authorization": f"Bearer {keys(tenant).key}"}
    text = "Caroline: We met in Boston on 3 May 2024 to plan the trip."
    assert api.post("/api/documents", json={"id": "dated", "text": text}, headers=own).status_code == 202
    wait_until_finished(api, tenant, ["dated"])
    dates = api.get("/api/entities", params={"kind": "date"}, headers=own).json()["entities"]
    assert [e["key"] for e in dates] == ["2024-05-03"]
    for name in (dates[0]["name"], "3 May 2024", "2024-05-03"):
        shown = api.get(f"/api/entities/{name}", headers=own)
        assert shown.status_code == 200, (name, shown.text)
        assert shown.json()["key"] == "2024-05-03"
