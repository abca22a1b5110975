"""API keys decide the tenant; anonymous, revoked, forged and foreign requests change nothing.

Against the real app, Neo4j (where keys live), Redis and workers.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from producers.http.deps import authenticator
from shared.auth import signature
from shared.settings import Settings
from tests.integration.support import KeyMaker, signed_headers, wait_until_finished
from tests.integration.tenants import client_with

pytestmark = pytest.mark.integration

# Every /api operation, with a body or query that would be valid for an admin naming a tenant.
OPERATIONS: list[tuple[str, str, dict[str, Any]]] = [
    ("POST", "/api/documents", {"json": {"user_id": "x", "text": "hello"}}),
    ("GET", "/api/documents/d1", {"params": {"user_id": "x"}}),
    ("PUT", "/api/documents/d1", {"json": {"user_id": "x", "text": "hello"}}),
    ("DELETE", "/api/documents/d1", {"params": {"user_id": "x"}}),
    ("GET", "/api/memories", {"params": {"user_id": "x"}}),
    ("GET", "/api/memories/m1", {"params": {"user_id": "x"}}),
    ("DELETE", "/api/memories/m1", {"params": {"user_id": "x"}}),
    ("POST", "/api/memories/delete", {"json": {"user_id": "x", "everything": True}}),
    ("POST", "/api/memory/semantic-search", {"json": {"user_id": "x", "query": "hello"}}),
    ("GET", "/api/status", {}),
]


def post_document(client: TestClient, **document: Any) -> Any:
    return client.post("/api/documents", json=document)


@pytest.mark.parametrize(("method", "path", "kwargs"), OPERATIONS)
def test_an_anonymous_request_is_refused_on_every_operation(
    api: TestClient, method: str, path: str, kwargs: dict[str, Any]
) -> None:
    response = client_with().request(method, path, **kwargs)

    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert "API key is required" in response.json()["detail"]


def test_healthz_needs_no_key_and_an_unknown_host_is_refused(api: TestClient) -> None:
    assert client_with().get("/healthz").status_code == 200
    # DNS rebinding: a page of evil.test resolving to 127.0.0.1 sends Host: evil.test
    response = api.get("/api/status", headers={"host": "evil.test"})
    assert response.status_code == 400
    assert "ENGRAM_ALLOWED_HOSTS" in response.json()["detail"]
    assert api.get("/healthz", headers={"host": "evil.test:8000"}).status_code == 400


def test_a_tenant_key_writes_reads_and_searches_its_own_tenant_without_naming_it(
    api: TestClient, keys: KeyMaker, tenant: str
) -> None:
    # Given a key for the tenant
    alice = client_with(keys(tenant).key)
    # When it posts a document naming no tenant
    response = post_document(alice, id="note", text="The boiler service is booked for Tuesday morning.")
    assert response.status_code == 202, response.text
    # Then it is the key's tenant's document, read and found without naming the tenant
    wait_until_finished(alice, tenant, ["note"])
    assert alice.get("/api/documents/note").json()["user_id"] == tenant
    assert api.get("/api/documents/note", params={"user_id": tenant}).json()["state"] == "done"
    found = alice.post("/api/memory/semantic-search", json={"query": "when is the boiler serviced"}).json()
    assert [r["document_id"] for r in found["results"]] == ["note"]
    listed = alice.get("/api/memories").json()["memories"]
    assert [m["document_id"] for m in listed] == ["note"]
    # And the status it sees is its tenant's alone
    status = alice.get("/api/status").json()
    assert status == {
        "user_id": tenant,
        "documents": 1,
        "memories": 1,
        "vector_sync": {"pending": 0, "synced": 1, "failed": 0},
    }


def test_a_tenant_key_naming_another_tenant_is_refused_and_changes_nothing(
    api: TestClient, keys: KeyMaker, tenant: str
) -> None:
    # Given a key for the tenant, and another tenant holding a document
    victim = f"{tenant}-victim"
    assert post_document(api, user_id=victim, id="secret", text="The safe code is 4711.").status_code == 202
    wait_until_finished(api, victim, ["secret"])
    mallory = client_with(keys(tenant).key)
    # When the key names the other tenant anywhere, in any form
    probes = [
        mallory.post("/api/documents", json={"user_id": victim, "id": "secret", "text": "overwritten"}),
        mallory.post(
            "/api/documents",
            json=[{"id": "mine", "text": "mine"}, {"user_id": victim, "id": "x", "text": "theirs"}],
        ),
        mallory.put("/api/documents/secret", json={"user_id": victim, "text": "overwritten"}),
        mallory.get("/api/documents/secret", params={"user_id": victim}),
        mallory.delete("/api/documents/secret", params={"user_id": victim}),
        mallory.get("/api/memories", params={"user_id": victim}),
        mallory.post("/api/memories/delete", json={"user_id": victim, "everything": True}),
        mallory.post("/api/memory/semantic-search", json={"user_id": victim, "query": "safe code"}),
        mallory.get("/api/status", params={"user_id": victim}),
    ]
    # Then each is a 403, and nothing of the victim's changed, nor was the batch's first document taken
    assert [p.status_code for p in probes] == [403] * len(probes)
    assert all("4711" not in p.text for p in probes)
    victim_doc = api.get("/api/documents/secret", params={"user_id": victim}).json()
    assert (victim_doc["state"], victim_doc["chunks"]) == ("done", 1)
    memories = api.get("/api/memories", params={"user_id": victim}).json()["memories"]
    assert [m["content"] for m in memories] == ["The safe code is 4711."]
    assert mallory.get("/api/documents/mine").status_code == 404
    # And the key's own view of those ids is empty: another tenant's id is not found, not forbidden
    assert mallory.get("/api/documents/secret").status_code == 404
    assert mallory.get(f"/api/memories/{memories[0]['id']}").status_code == 404
    assert mallory.delete(f"/api/memories/{memories[0]['id']}").status_code == 404


def test_an_admin_key_names_the_tenant_and_sees_the_whole_store(api: TestClient, tenant: str) -> None:
    response = api.post("/api/documents", json={"text": "no tenant named"})
    assert response.status_code == 422
    assert "user_id is required" in response.json()["detail"]
    overview = api.get("/api/status").json()
    assert {"queues", "vector_sync", "sync_health"} <= set(overview)


def test_the_key_works_in_x_api_key_as_n8n_header_auth_sends_it(keys: KeyMaker, tenant: str) -> None:
    n8n = client_with(**{"X-API-Key": keys(tenant).key})
    assert n8n.get("/api/status").json()["user_id"] == tenant


def test_a_revoked_key_is_refused(api: TestClient, keys: KeyMaker, tenant: str) -> None:
    # Given a key in use
    made = keys(tenant)
    client = client_with(made.key)
    assert client.get("/api/status").status_code == 200
    # When it is revoked (engram keys revoke), and the app's few seconds of cache have passed
    from producers.client import EngramClient
    from shared.models import utc_now

    operator = EngramClient()
    try:
        assert operator.key_store().revoke_key(made.info.id, utc_now())
    finally:
        operator.close()
    authenticator().forget()
    # Then it is refused, and a forged secret for a live id is too
    assert client.get("/api/status").status_code == 401
    live = keys(tenant)
    assert client_with(live.key[:-2] + "zz").get("/api/status").status_code == 401


def test_a_signed_webhook_lands_in_its_keys_tenant_once(api: TestClient, keys: KeyMaker, tenant: str) -> None:
    # Given a key made with a signing secret, and a body signed with it
    made = keys(tenant, signing=True)
    assert made.signing_secret is not None
    body = b'{"id": "hook", "text": "The standup moved to nine thirty."}'
    timestamp = str(int(time.time()))
    headers = {
        "content-type": "application/json",
        "x-engram-key-id": made.info.id,
        "x-engram-timestamp": timestamp,
        "x-engram-signature": signature(made.signing_secret, timestamp, body),
    }
    hook = client_with()
    # When it is posted
    response = hook.post("/api/documents", content=body, headers=headers)
    # Then it is accepted for the key's tenant
    assert response.status_code == 202, response.text
    wait_until_finished(api, tenant, ["hook"])
    # And the same request again, or with its body changed, is refused
    assert hook.post("/api/documents", content=body, headers=headers).status_code == 401
    tampered = body.replace(b"nine", b"ten")
    assert hook.post("/api/documents", content=tampered, headers=headers).status_code == 401
    stale = str(int(time.time()) - 3600)
    old = {
        **headers,
        "x-engram-timestamp": stale,
        "x-engram-signature": signature(made.signing_secret, stale, body),
    }
    assert hook.post("/api/documents", content=body, headers=old).status_code == 401
    # And a signature is good for posting documents only: it does not cover the method or path
    fresh = str(int(time.time()))
    other = {
        **headers,
        "x-engram-timestamp": fresh,
        "x-engram-signature": signature(made.signing_secret, fresh, b""),
    }
    assert hook.delete("/api/documents/hook", headers=other).status_code == 401
    assert api.get("/api/documents/hook", params={"user_id": tenant}).json()["state"] == "done"


def test_repeated_bearer_guesses_meet_a_429_per_key_id_and_per_address(
    keys: KeyMaker, tenant: str, settings: Settings
) -> None:
    # Given guesses of one real key's secret, from one client
    real = keys(tenant).key
    guess = client_with(real[:-4] + "AAAA")
    bound = settings.auth_failures_per_key
    answers = [guess.get("/api/memories").status_code for _ in range(bound + 1)]
    # Then the key id is held off once past its bound, its right secret too, with Retry-After
    assert answers[:bound] == [401] * bound and answers[bound] == 429
    late = client_with(real).get("/api/memories")
    assert late.status_code == 429 and int(late.headers["retry-after"]) >= 1

    # And guesses of ever new key ids from one address are held off past the address's bound
    answers = [
        client_with(f"egk_{i:016x}_" + "A" * 43).get("/api/memories").status_code
        for i in range(settings.auth_failures_per_address)
    ]
    assert 429 in answers
    assert client_with(keys(f"{tenant}-b").key).get("/api/memories").status_code == 429


def test_repeated_forged_signatures_meet_a_429_per_key_id(
    keys: KeyMaker, tenant: str, settings: Settings
) -> None:
    # Given a signing key, and bodies signed with a guessed secret in its name
    made = keys(tenant, signing=True)
    assert made.signing_secret is not None
    body = b'{"id": "guessed", "text": "Signed with a guess."}'
    hook = client_with()

    def post(secret: str) -> int:
        headers = signed_headers(made.info.id, secret, body)
        return hook.post("/api/documents", content=body, headers=headers).status_code

    bound = settings.auth_failures_per_key
    answers = [post(f"guess{i}") for i in range(bound + 1)]
    # Then the key id is held off past its bound, as a Bearer guess is, its right secret too
    assert answers[:bound] == [401] * bound and answers[bound] == 429
    assert post(made.signing_secret) == 429
