"""The HTTP SDK (``producers.sdk``) against the served app (``engram serve``) and the real
workers: ingest, wait, status, search, entities, delete, typed errors, and tenants kept apart."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from producers.sdk import (
    AsyncEngramHTTP,
    Conflict,
    EngramHTTP,
    Forbidden,
    InvalidRequest,
    NotFound,
    Unauthorized,
)
from shared.models import DocumentBody, SearchFilters, TenantOverview
from shared.settings import Settings
from tests.integration.served import engram_serving
from tests.integration.support import KeyMaker, Workers

pytestmark = pytest.mark.integration

MAYA = "Maya moved to Lisbon in May; she bakes bread at a bakery near the river."
DENTIST = "The dentist appointment moved to Tuesday at nine."
# An id a careless client would turn into another path: slashes and dot segments.
MAYA_ID = "notes/../2026/maya.md"


@pytest.fixture(scope="module")
def app_url(settings: Settings, workers: Workers) -> Iterator[str]:
    port = settings.api_port
    log = settings.data_dir / "logs" / "test-http-client.log"
    args = ["serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    with engram_serving(args, port, log, "/healthz") as base:
        yield base


def test_an_app_ingests_waits_searches_and_deletes_through_the_sdk(
    app_url: str, keys: KeyMaker, tenant: str
) -> None:
    other = f"{tenant}-other"
    with (
        EngramHTTP(app_url, keys(tenant).key) as alice,
        EngramHTTP(app_url, keys(other).key, auth="bearer") as bob,
    ):
        accepted = alice.ingest(
            [
                DocumentBody(id=MAYA_ID, text=MAYA, session_id="s1"),
                {"id": "dentist", "text": DENTIST, "session_id": "s1", "tags": ["health"]},
            ]
        )
        assert accepted.accepted == 2 and accepted.document_ids == [MAYA_ID, "dentist"]
        statuses = alice.wait(accepted, timeout=120)
        assert [(s.document_id, s.state) for s in statuses] == [(MAYA_ID, "done"), ("dentist", "done")]
        assert all(s.user_id == tenant and s.chunks >= 1 for s in statuses)

        found = alice.search("where does Maya live", top_k=1, token_budget=200)
        assert [r.document_id for r in found.results] == [MAYA_ID]
        assert found.context is not None and "Lisbon" in found.context
        tagged = alice.search("appointment", filters=SearchFilters(tags=["health"]))
        assert {r.document_id for r in tagged.results} == {"dentist"}

        page = alice.list_memories(filters=SearchFilters(document_id=MAYA_ID))
        (memory,) = page.memories
        assert alice.get_memory(memory.id).content == memory.content
        maya = alice.entity("Maya")
        assert maya.key == "maya" and [m.id for m in maya.mentioned_in] == [memory.id]
        assert "maya" in [e.key for e in alice.entities(prefix="may").entities]
        overview = alice.overview()
        assert isinstance(overview, TenantOverview) and overview.documents == 2

        # Another tenant's key sees none of it and cannot touch it
        assert bob.search("where does Maya live").results == []
        with pytest.raises(NotFound) as missing:
            bob.status(MAYA_ID)
        assert missing.value.status == 404 and MAYA_ID in missing.value.detail
        with pytest.raises(NotFound):
            bob.delete_document(MAYA_ID)
        with pytest.raises(NotFound):
            bob.get_memory(memory.id)
        with pytest.raises(Forbidden) as forbidden:
            bob.status(MAYA_ID, user_id=tenant)
        assert forbidden.value.status == 403

        # The app's own 4xx answers, typed
        with pytest.raises(Conflict) as conflict:
            alice.update("dentist", {"id": "another", "text": DENTIST})
        assert conflict.value.status == 409 and "another" in conflict.value.detail
        with EngramHTTP(app_url, keys(None).key) as admin, pytest.raises(InvalidRequest) as invalid:
            admin.search("where does Maya live")  # an admin key must name the tenant
        assert invalid.value.status == 422 and "user_id" in invalid.value.detail

        # Deleted: gone from search at once, its status says so
        deleted = alice.delete_document(MAYA_ID)
        assert deleted.memories == 1
        assert MAYA_ID not in [r.document_id for r in alice.search("where does Maya live").results]
        assert alice.status(MAYA_ID).state == "deleted"
        assert alice.status("dentist").state == "done"


def test_a_wrong_key_is_a_typed_401_and_no_key_too(app_url: str, tenant: str) -> None:
    for key in ("egk_not-a-key", None):
        with EngramHTTP(app_url, key) as stranger, pytest.raises(Unauthorized) as refused:
            stranger.search("anything", user_id=tenant)
        assert refused.value.status == 401 and "key" in refused.value.detail


async def _async_scenario(app_url: str, key: str, other_key: str) -> dict[str, object]:
    seen: dict[str, object] = {}
    async with AsyncEngramHTTP(app_url, key) as alice, AsyncEngramHTTP(app_url, other_key) as bob:
        accepted = await alice.ingest({"id": "trip", "text": "We hiked Mount Tam on Saturday with Omar."})
        seen["states"] = [s.state for s in await alice.wait(accepted, timeout=120)]
        found = await alice.search("when did we go hiking", top_k=3)
        seen["found"] = [r.document_id for r in found.results]
        seen["bob_found"] = [r.document_id for r in (await bob.search("when did we go hiking")).results]
        try:
            await bob.forget("trip")
        except NotFound as exc:
            seen["bob_forget"] = exc.status
        seen["status"] = (await alice.status("trip")).state
        seen["forgotten"] = (await alice.forget("trip")).memories
        seen["after"] = [r.document_id for r in (await alice.search("when did we go hiking")).results]
    async with AsyncEngramHTTP(app_url, "egk_wrong") as stranger:
        try:
            await stranger.status("trip")
        except Unauthorized as exc:
            seen["stranger"] = exc.status
    return seen


def test_the_async_client_does_the_same(app_url: str, keys: KeyMaker, tenant: str) -> None:
    seen = asyncio.run(_async_scenario(app_url, keys(tenant).key, keys(f"{tenant}-b").key))

    assert seen["states"] == ["done"]
    assert seen["found"] == ["trip"]
    assert seen["bob_found"] == []
    assert seen["bob_forget"] == 404
    assert seen["status"] == "done"
    assert seen["forgotten"] == 1
    assert seen["after"] == []
    assert seen["stranger"] == 401
