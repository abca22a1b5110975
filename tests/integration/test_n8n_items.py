"""``POST /api/documents`` takes n8n's item shape (``[{"json": {...}, "pairedItem": ...}]``), as an
HTTP Request node posting ``JSON.stringify($input.all())`` sends it, with the checks and bounds
of Engram's own shapes; a signed webhook takes it too."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from shared.auth import signature
from tests.integration.support import KeyMaker, wait_until_finished
from tests.integration.tenants import client_with

pytestmark = pytest.mark.integration


def items(*documents: dict[str, Any]) -> list[dict[str, Any]]:
    """What n8n's ``$input.all()`` serialises to: each item's data under ``json``, and where it
    came from under ``pairedItem``."""
    return [{"json": document, "pairedItem": {"item": i}} for i, document in enumerate(documents)]


def unknown(api: TestClient, tenant: str, document_id: str) -> bool:
    return api.get(f"/api/documents/{document_id}", params={"user_id": tenant}).status_code == 404


def test_n8n_items_are_stored_like_documents_in_both_stores(
    api: TestClient, keys: KeyMaker, tenant: str
) -> None:
    # Given a tenant key, as n8n's Header Auth credential sends it
    n8n = client_with(None, **{"X-API-Key": keys(tenant).key})
    body = items(
        {"id": "n8n-1", "text": "The supplier call moved to Friday at three.", "tags": ["n8n"]},
        {"id": "n8n-2", "text": "Invoice 4471 was paid in full.", "metadata": {"source_app": "n8n"}},
    )
    # a merged item names its inputs in a list, and where n8n rewired it, the node it came from
    source = {"previousNode": "Documents", "previousNodeOutput": 0, "previousNodeRun": 0}
    body[1]["pairedItem"] = [{"item": 1, "input": 0}, {"item": 0, "input": 1, "sourceOverwrite": source}]
    body[0]["pairedItem"] = {"item": 0.0}  # JSON Schema's integer: a whole number however written
    # When n8n posts its items
    response = n8n.post("/api/documents", json=body)
    # Then each item's json is a document of the key's tenant, stored and synced to Qdrant
    assert response.status_code == 202, response.text
    assert response.json()["document_ids"] == ["n8n-1", "n8n-2"]
    statuses = wait_until_finished(api, tenant, ["n8n-1", "n8n-2"])
    for status in statuses.values():
        assert status["state"] == "done", status
        assert status["user_id"] == tenant
        assert status["vector_sync"] == {"pending": 0, "synced": status["chunks"], "failed": 0}
    # And one item alone, not in a list, is taken too
    alone = n8n.post("/api/documents", json={"json": {"id": "n8n-3", "text": "Ship the parcel."}})
    assert alone.status_code == 202, alone.text
    assert wait_until_finished(api, tenant, ["n8n-3"])["n8n-3"]["state"] == "done"


def test_a_bad_item_refuses_the_whole_request_and_names_where(
    api: TestClient, keys: KeyMaker, tenant: str
) -> None:
    n8n = client_with(keys(tenant).key)
    good = {"id": "fine", "text": "A good document."}
    # sourceOverwrite is n8n's ISourceData (the full fuzz run: {"k": false} was queued)
    not_a_source = {"item": 0, "sourceOverwrite": {"k": False}}
    cases: list[tuple[Any, int, str]] = [
        # an item's document is checked as a document alone is
        (items(good, {"id": "blank", "text": "   "}), 422, "body.items.1.json.text"),
        (items(good, {"id": "x", "text": "t", "colour": "red"}), 422, "body.items.1.json.colour"),
        # binary data, or any other key of an item, is refused: Engram takes text
        ([{"json": good, "binary": {"data": {"data": "aGk="}}}], 422, "body.items.0.binary"),
        # an element without json in a list of items is no item
        ([{"json": good}, {"id": "plain", "text": "plain"}], 422, "body.items.1.json"),
        ([{"json": good, "pairedItem": {"item": -1}}], 422, "body.items.0.pairedItem"),
        # a boolean is no item number (the full fuzz run: pairedItem true was accepted as 1)
        ([{"json": good, "pairedItem": True}], 422, "body.items.0.pairedItem"),
        ([{"json": good, "pairedItem": {"item": False}}], 422, "body.items.0.pairedItem"),
        ([{"json": "not an object"}], 422, "body.items.0.json"),
        (
            [{"json": good, "pairedItem": not_a_source}],
            422,
            "body.items.0.pairedItem.PairedItem.sourceOverwrite.k",
        ),
        ([{"json": good, "pairedItem": [{"item": 0, "sourceOverwrite": {}}]}], 422, "sourceOverwrite"),
        # another tenant named in one item
        (items(good, {"text": "theirs", "user_id": tenant + "-other"}), 403, "user_id"),
        # the same document twice
        (items(good, good), 409, "fine"),
    ]
    for body, status, named in cases:
        response = n8n.post("/api/documents", json=body)
        assert response.status_code == status, (body, response.text)
        assert named in response.text, (named, response.text)
    # And nothing of those requests was queued
    assert unknown(api, tenant, "fine")


def test_items_are_bounded_like_documents(api: TestClient, keys: KeyMaker, tenant: str) -> None:
    n8n = client_with(keys(tenant).key)
    # More than ENGRAM_MAX_BATCH_DOCUMENTS items are refused before any is validated, fast
    many = "[" + ",".join(['{"json":0}'] * 1_000_000) + "]"
    started = time.monotonic()
    response = n8n.post("/api/documents", content=many, headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text[:300]
    assert time.monotonic() - started < 10
    assert "1000" in response.json()["detail"]
    assert len(response.content) < 64_000
    # An empty list is no documents, whichever shape
    assert n8n.post("/api/documents", json=[]).status_code == 422
    # And a text over ENGRAM_MAX_DOCUMENT_BYTES inside an item is 413, as alone
    huge = n8n.post("/api/documents", json=items({"id": "huge", "text": "x" * 1_000_001}))
    assert huge.status_code == 413, huge.text[:300]
    assert unknown(api, tenant, "huge")


def test_n8n_bookkeeping_is_bounded_with_a_clear_422(api: TestClient, keys: KeyMaker, tenant: str) -> None:
    # Given an item whose pairedItem names a 20 MB node (issue 25: it was queued, 202)
    n8n = client_with(keys(tenant).key)
    source = {"previousNode": "n" * 20_000_000}
    body = items({"id": "paired-huge", "text": "A fine document."})
    body[0]["pairedItem"] = {"item": 0, "sourceOverwrite": source}
    # When it is posted
    response = n8n.post("/api/documents", json=body)
    # Then it is refused, naming the field and its limit, without the 20 MB echoed back
    assert response.status_code == 422, response.text[:300]
    assert "previousNode" in response.text and "1024" in response.text, response.text[:300]
    assert len(response.content) < 64_000
    # And an item number past a JavaScript array's is refused as well
    body[0]["pairedItem"] = {"item": 2**53}
    assert n8n.post("/api/documents", json=body).status_code == 422
    assert unknown(api, tenant, "paired-huge")


def test_a_signed_webhook_takes_n8n_items(api: TestClient, keys: KeyMaker, tenant: str) -> None:
    # Given a signing key and a body of n8n items signed as a Code/Crypto node signs it
    made = keys(tenant, signing=True)
    assert made.signing_secret is not None
    document_id = f"signed-{uuid.uuid4().hex[:8]}"
    body = json.dumps(items({"id": document_id, "text": "The board meets on the first Monday."})).encode()
    timestamp = str(int(time.time()))
    headers = {
        "content-type": "application/json",
        "x-engram-key-id": made.info.id,
        "x-engram-timestamp": timestamp,
        "x-engram-signature": signature(made.signing_secret, timestamp, body),
    }
    # When it is posted without a key
    response = client_with().post("/api/documents", content=body, headers=headers)
    # Then it lands in the key's tenant
    assert response.status_code == 202, response.text
    assert wait_until_finished(api, tenant, [document_id])[document_id]["state"] == "done"
