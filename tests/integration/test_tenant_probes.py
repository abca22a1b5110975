"""Cross-tenant probes: tenant B, with its own API key, tries every endpoint, filter and id form at
tenant A's documents and memories, and never learns or changes anything of A's; nor does a
look-alike of A's name, a request naming A with B's key (403), one without a key or with a wrong
or revoked one (401).

A leak is any of A's content, ids, tenant name or stored keys in an answer to B (beyond what B
sent itself), an answer to an id of A's that differs from the answer to an id nobody has (so it
tells that A's exists), B seeing or changing a count of A's, or A's data changed afterwards. The
probes and leaks are counted and printed at the end of the run.
"""

from __future__ import annotations

import json
import re
import unicodedata
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

import httpx
import pytest
from fastapi.testclient import TestClient

from shared.ids import document_key
from tests.integration.support import KeyMaker, wait_until_finished
from tests.integration.tenants import PROBES, Acting, Answer, Probes, acting_as, client_with

pytestmark = pytest.mark.integration


@dataclass
class Tenant:
    name: str
    hex: str
    documents: dict[str, str]
    memories: list[dict[str, Any]]
    project: str
    session: str
    tag: str

    @property
    def memory_ids(self) -> list[str]:
        return [memory["id"] for memory in self.memories]

    def secrets(self) -> list[str]:
        """What no one else may see: its name, texts' marker, ids of documents and memories, keys."""
        keys = [document_key(self.name, document_id) for document_id in self.documents]
        return [self.name, f"zq{self.hex}x", *self.documents, *self.memory_ids, *keys]


def _ingest(api: TestClient, name: str, hexid: str, texts: dict[str, str], kind: str, said_at: str) -> Tenant:
    project, session, tag = f"project-{hexid}", f"session-{hexid}", f"tag-{hexid}"
    documents = [
        {
            "user_id": name,
            "id": document_id,
            "text": text,
            "title": f"title zq{hexid}x",
            "project_id": project,
            "session_id": session,
            "tags": [tag],
            "memory_type": kind,
            "created_at": said_at,
        }
        for document_id, text in texts.items()
    ]
    response = api.post("/api/documents", json={"documents": documents})
    assert response.status_code == 202, response.text
    statuses = wait_until_finished(api, name, list(texts))
    assert {status["state"] for status in statuses.values()} == {"done"}
    memories = api.get("/api/memories", params={"user_id": name}).json()["memories"]
    assert len(memories) == len(texts)
    return Tenant(name, hexid, texts, memories, project, session, tag)


@pytest.fixture(scope="module")
def alice(api: TestClient) -> Tenant:
    """Tenant A: a name with a composed character (its NFD form is a look-alike), a document id
    with slashes and one with spaces, every text holding the marker zq<hex>x."""
    hexid = uuid.uuid4().hex[:10]
    marker = f"zq{hexid}x"
    texts = {
        f"plain-{hexid}": f"The secret recipe {marker} uses saffron, cardamom and rose water.",
        f"notes/{hexid}/secret.md": f"Private notes {marker}: the vault code is 4417.",
        f"spaced id {hexid}": f"Quarterly numbers {marker} are confidential until May.",
    }
    return _ingest(api, f"caf\u00e9-{hexid}", hexid, texts, "fact", "2024-05-01T12:00:00Z")


@pytest.fixture(scope="module")
def bob(api: TestClient, alice: Tenant) -> Tenant:
    """Tenant B, with one document of its own on the same subject."""
    hexid = uuid.uuid4().hex[:10]
    texts = {f"own-{hexid}": "My own recipe uses saffron and rose water."}
    return _ingest(api, f"bob-{hexid}", hexid, texts, "note", "2023-01-01T08:00:00Z")


@pytest.fixture(scope="module")
def probes() -> Iterator[Probes]:
    log = Probes()
    yield log
    PROBES.merge(log)


def _snapshot(api: TestClient, tenant: Tenant) -> list[tuple[str, str, int]]:
    memories = api.get("/api/memories", params={"user_id": tenant.name}).json()["memories"]
    return sorted((m["id"], m["content"], m["version"]) for m in memories)


@pytest.fixture(scope="module")
def unchanged(api: TestClient, alice: Tenant) -> Iterator[None]:
    """A's memories, ids, texts and versions, are the same after the probes as before."""
    before = _snapshot(api, alice)
    yield
    assert _snapshot(api, alice) == before


class Prober:
    """B's requests at A's data, each counted, and judged a leak or not."""

    def __init__(self, api: TestClient, keys: KeyMaker, alice: Tenant, bob: Tenant, log: Probes) -> None:
        self.alice, self.bob, self.log, self.keys = alice, bob, log, keys
        self.as_bob = acting_as(keys, bob.name)
        self.as_admin = Acting(api, "admin")
        self.control_hex = uuid.uuid4().hex[:10]

    def _shows_secret(self, response: Answer, sent: str) -> bool:
        return any(secret in response.text and secret not in sent for secret in self.alice.secrets())

    def by_id(
        self, kind: str, method: str, url: str, as_: Acting | None = None, writes: bool = False, **kwargs: Any
    ) -> Answer:
        """``url`` names A's data; the same request naming nobody's (A's hex swapped) must get the
        same answer, but for that hex. Only a request that ``writes`` B's own may succeed."""
        client = as_ or self.as_bob
        probe = client.request(method, url, **kwargs)
        control_url = url.replace(self.alice.hex, self.control_hex)
        control_kwargs = json.loads(json.dumps(kwargs).replace(self.alice.hex, self.control_hex))
        control = client.request(method, control_url, **control_kwargs)
        same = probe.status_code == control.status_code and _comparable(probe, self) == _comparable(
            control, self
        )
        sent = unquote(url) + json.dumps(kwargs, ensure_ascii=False)
        leaked = (probe.status_code < 300 and not writes) or not same or self._shows_secret(probe, sent)
        self.log.record(kind, f"{method} {url} {kwargs} -> {probe.status_code} {probe.text[:200]}", leaked)
        return probe

    def by_memory_id(self, kind: str, method: str, form: Callable[[str], str], memory_id: str) -> None:
        """A memory id of A's written as ``form`` writes it; the same form of an id nobody has must
        get the same answer, but for that id."""
        control_id = str(uuid.uuid4())
        probe = self.as_bob.request(method, "/api/memories/" + form(memory_id))
        control = self.as_bob.request(method, "/api/memories/" + form(control_id))
        text = re.sub(re.escape(memory_id), control_id, probe.text, flags=re.IGNORECASE)
        text = re.sub(
            re.escape(memory_id.replace("-", "")), control_id.replace("-", ""), text, flags=re.IGNORECASE
        )
        same = probe.status_code == control.status_code and text.lower() == control.text.lower()
        leaked = probe.status_code < 300 or not same or self._shows_secret(probe, form(memory_id) + memory_id)
        self.log.record(kind, f"{method} {form(memory_id)} -> {probe.status_code} {probe.text[:200]}", leaked)

    def refused(self, kind: str, response: Answer, sent: str, statuses: tuple[int, ...]) -> None:
        """A request that must be refused with one of ``statuses``, showing nothing of A's."""
        leaked = response.status_code not in statuses or self._shows_secret(response, sent)
        self.log.record(kind, f"{sent[:200]} -> {response.status_code} {response.text[:200]}", leaked)

    def sees_only_bob(self, kind: str, response: Answer, sent: str) -> None:
        """A listing, search or delete answered to B: B's own memories, counts and nothing of A's."""
        leaked = self._shows_secret(response, sent) or response.status_code >= 500
        if response.status_code == 200:
            body = response.json()
            memories, results = body.get("memories", []), body.get("results", [])
            if isinstance(memories, int):  # a delete's count: beyond B's own it would be A's
                leaked |= memories > len(self.bob.memories)
            else:
                leaked |= any(m["user_id"] != self.bob.name for m in memories)
            leaked |= any(r["id"] in self.alice.memory_ids for r in results)
        self.log.record(kind, f"{sent[:200]} -> {response.status_code} {response.text[:200]}", leaked)


def _comparable(response: Answer, prober: Prober) -> str:
    """The answer with A's hex (which B sent) swapped for the control's, and ids of work B's own
    requests started (a PUT's version, tasks) left out."""
    text = re.sub(prober.alice.hex, prober.control_hex, response.text, flags=re.IGNORECASE)
    try:
        body = json.loads(text)
    except ValueError:
        return text
    if isinstance(body, dict):
        body.pop("version", None)
        body.pop("task_ids", None)
    return json.dumps(body, sort_keys=True)


@pytest.fixture(scope="module")
def prober(
    api: TestClient, keys: KeyMaker, alice: Tenant, bob: Tenant, probes: Probes, unchanged: None
) -> Prober:
    return Prober(api, keys, alice, bob, probes)


def _look_alikes(name: str) -> list[str]:
    """Names that read as A's: white space of several kinds, case, zero-width, NFD, BOM."""
    return [
        name + " ",
        " " + name,
        "\u00a0" + name,
        name + "\u3000",
        name + "\t",
        name.upper(),
        name + "\u200b",
        "\u200b" + name,
        name.replace("-", "\u2011"),
        unicodedata.normalize("NFD", name),
        "\ufeff" + name,
        name + "\x00",
    ]


def _id_forms(document_id: str) -> list[str]:
    """One id as a URL path can write it: encoded, with a slash at either end, dot segments, doubled
    slashes, another case."""
    return [
        quote(document_id, safe="/"),
        quote(document_id, safe=""),
        "".join(f"%{byte:02X}" for byte in document_id.encode()),
        quote(document_id, safe="/") + "/",
        "/" + quote(document_id, safe="/"),
        "./" + quote(document_id, safe="/"),
        quote(document_id, safe="/").replace("/", "//"),
        quote(document_id, safe="/").upper(),
        quote(document_id, safe="/") + "%20",
        quote(document_id, safe="/") + "%E2%80%8B",
    ]


# Reading, replacing and deleting A's documents by id.


def test_b_cannot_read_or_delete_a_document_of_a_by_any_id_form(prober: Prober, alice: Tenant) -> None:
    start = len(prober.log.leaks)
    for document_id in alice.documents:
        for form in _id_forms(document_id):
            prober.by_id("document by id", "GET", f"/api/documents/{form}")
            prober.by_id("document by id", "DELETE", f"/api/documents/{form}")
    assert prober.log.leaks[start:] == []


def test_look_alike_tenant_names_neither_read_nor_change_a(
    prober: Prober, alice: Tenant, keys: KeyMaker
) -> None:
    start = len(prober.log.leaks)
    document_id = quote(next(iter(alice.documents)))
    for name in _look_alikes(alice.name):
        # B's key naming a look-alike: not B's tenant (403), or not an identifier (422)
        named = {"params": {"user_id": name}}
        for method in ("GET", "DELETE"):
            response = prober.as_bob.request(method, f"/api/documents/{document_id}", **named)
            prober.refused("look-alike named with B's key", response, name, (403, 422))
        searched = prober.as_bob.post(
            "/api/memory/semantic-search", json={"user_id": name, "query": "secret"}
        )
        prober.refused("look-alike named with B's key", searched, name, (403, 422))
        # An admin key naming a look-alike: refused, or another tenant, which has nothing of A's
        for method in ("GET", "DELETE"):
            prober.by_id(
                "look-alike named by an admin",
                method,
                f"/api/documents/{document_id}",
                prober.as_admin,
                **named,
            )
        listed = prober.as_admin.get("/api/memories", params={"user_id": name})
        prober.sees_only_bob("look-alike named by an admin", listed, name)
        body = {"user_id": name, "query": "secret recipe saffron", "threshold": -1.0}
        searched = prober.as_admin.post("/api/memory/semantic-search", json=body)
        prober.sees_only_bob("look-alike named by an admin", searched, json.dumps(body, ensure_ascii=False))
        deleted = prober.as_admin.post("/api/memories/delete", json={"user_id": name, "everything": True})
        prober.sees_only_bob("look-alike named by an admin", deleted, name)
        assert deleted.status_code == 422 or deleted.json()["memories"] == 0
        # A key made for a look-alike: refused, or its tenant has nothing of A's
        try:
            look_alike = acting_as(keys, name)
        except Exception:  # refused when made
            prober.log.record("key for a look-alike", name, False)
            continue
        prober.sees_only_bob("key for a look-alike", look_alike.get("/api/memories"), name)
        prober.by_id("key for a look-alike", "GET", f"/api/documents/{document_id}", look_alike)
    assert prober.log.leaks[start:] == []


# Memories by id.


MEMORY_ID_FORMS: list[Callable[[str], str]] = [
    lambda m: m,
    lambda m: m + "/",
    lambda m: m.upper(),
    lambda m: "urn:uuid:" + m,
    lambda m: "%7B" + m + "%7D",
    lambda m: m.replace("-", ""),
    lambda m: quote(m, safe=""),
    lambda m: "".join(f"%{ord(c):02X}" for c in m),
]


def test_b_cannot_read_or_delete_a_memory_of_a_by_any_id_form(prober: Prober, alice: Tenant) -> None:
    start = len(prober.log.leaks)
    for memory_id in alice.memory_ids:
        for form in MEMORY_ID_FORMS:
            for method in ("GET", "DELETE"):
                prober.by_memory_id("memory by id", method, form, memory_id)
    assert prober.log.leaks[start:] == []


# Listing, searching and deleting with A's values as filters.


def _filters(alice: Tenant) -> list[dict[str, Any]]:
    """Every filter, alone, with A's values (or all of them at once)."""
    document_id = next(iter(alice.documents))
    single: list[dict[str, Any]] = [
        {"document_id": document_id},
        {"project_id": alice.project},
        {"session_id": alice.session},
        {"tags": [alice.tag]},
        {"memory_types": ["fact"]},
        {"from_date": "2024-05-01T00:00:00Z", "to_date": "2024-05-02T00:00:00Z"},
    ]
    return [*single, {key: value for item in single for key, value in item.items()}]


def _query_params(filters: dict[str, Any]) -> list[tuple[str, Any]]:
    names = {"tags": "tag", "memory_types": "memory_type"}
    return [
        (names.get(key, key), item)
        for key, value in filters.items()
        for item in (value if isinstance(value, list) else [value])
    ]


def test_b_listing_with_a_s_filters_sees_only_b_s_memories(
    prober: Prober, alice: Tenant, bob: Tenant
) -> None:
    start = len(prober.log.leaks)
    for filters in [*_filters(alice), {}]:
        params = _query_params(filters)
        listed = prober.as_bob.get("/api/memories", params=params)
        prober.sees_only_bob("list with filters", listed, json.dumps(params, ensure_ascii=False))
    for cursor in ["", *alice.memory_ids]:
        listed = prober.as_bob.get("/api/memories", params={"cursor": cursor, "limit": 1})
        prober.sees_only_bob("list with cursor", listed, cursor)
    assert prober.log.leaks[start:] == []


def test_b_searching_for_a_s_words_with_a_s_filters_finds_only_b_s(
    prober: Prober, alice: Tenant, bob: Tenant
) -> None:
    start = len(prober.log.leaks)
    queries = [f"zq{alice.hex}x", "secret recipe saffron cardamom rose water", "vault code", *alice.documents]
    for query in queries:
        for filters in [{}, *_filters(alice)]:
            body = {"query": query, "filters": filters, "top_k": 100, "threshold": -1.0}
            searched = prober.as_bob.post("/api/memory/semantic-search", json=body)
            # The answer echoes the query B sent: only its results count
            results = httpx.Response(
                searched.status_code, json={"results": searched.json().get("results", [])}
            )
            prober.sees_only_bob("search", results, json.dumps(body, ensure_ascii=False))
    assert prober.log.leaks[start:] == []


def test_b_deleting_with_a_s_filters_deletes_nothing_of_a(prober: Prober, alice: Tenant, bob: Tenant) -> None:
    start = len(prober.log.leaks)
    for filters in _filters(alice):
        deleted = prober.as_bob.post("/api/memories/delete", json={"filters": filters})
        prober.sees_only_bob("delete where", deleted, json.dumps(filters, ensure_ascii=False))
        # B has no memory matching A's values: a count above 0 would be A's
        assert deleted.status_code == 200 and deleted.json()["memories"] == 0, deleted.text
    assert prober.log.leaks[start:] == []


# Duplicate keys: one request that names B and A.


def test_a_request_naming_b_and_a_twice_over_is_refused(prober: Prober, alice: Tenant, bob: Tenant) -> None:
    start = len(prober.log.leaks)
    document_id = next(iter(alice.documents))
    twice = [("user_id", bob.name), ("user_id", alice.name)]
    for method, url in [
        ("GET", f"/api/documents/{quote(document_id)}"),
        ("DELETE", f"/api/documents/{quote(document_id)}"),
        ("GET", "/api/memories"),
        ("GET", f"/api/memories/{alice.memory_ids[0]}"),
        ("DELETE", f"/api/memories/{alice.memory_ids[0]}"),
    ]:
        for params in (twice, twice[::-1]):
            response = prober.as_bob.request(method, url, params=params)
            prober.sees_only_bob(
                "duplicate query key", response, url + json.dumps(params, ensure_ascii=False)
            )
            assert response.status_code == 422, (method, url, response.text)
    bodies = [
        ("/api/memory/semantic-search", '{{"user_id": "{b}", "query": "secret recipe", "user_id": "{a}"}}'),
        ("/api/memories/delete", '{{"user_id": "{b}", "everything": true, "user_id": "{a}"}}'),
        (
            "/api/memories/delete",
            '{{"user_id": "{b}", "filters": {{"document_id": "x", "document_id": "{d}"}}}}',
        ),
        ("/api/documents", '{{"user_id": "{b}", "text": "Overwrite.", "id": "{d}", "user_id": "{a}"}}'),
    ]
    for url, raw in bodies:
        content = raw.format(a=alice.name, b=bob.name, d=document_id).encode()
        response = prober.as_bob.post(url, content=content)
        prober.sees_only_bob("duplicate body key", response, content.decode())
        assert response.status_code == 422, (url, response.text)
    assert prober.log.leaks[start:] == []


def test_b_replacing_a_document_id_of_a_writes_only_b_s_own(
    api: TestClient, prober: Prober, alice: Tenant, bob: Tenant
) -> None:
    start = len(prober.log.leaks)
    # Given B puts a document under each of A's ids (B's own namespace: allowed)
    for document_id in alice.documents:
        body = {"text": f"Bob's text {bob.hex} under a familiar id."}
        prober.by_id(
            "replace by id", "PUT", f"/api/documents/{quote(document_id, safe='/')}", writes=True, json=body
        )
        wait_until_finished(api, bob.name, [document_id])

    # Then A still reads its own text under each id, and B its own
    for document_id, text in alice.documents.items():
        mine = api.get("/api/memories", params={"user_id": alice.name, "document_id": document_id})
        assert [m["content"] for m in mine.json()["memories"]] == [text]
        theirs = api.get("/api/memories", params={"user_id": bob.name, "document_id": document_id})
        assert [m["content"] for m in theirs.json()["memories"]] == [
            f"Bob's text {bob.hex} under a familiar id."
        ]
        api.delete(f"/api/documents/{quote(document_id, safe='/')}", params={"user_id": bob.name})
    assert prober.log.leaks[start:] == []


def test_a_memory_of_a_is_unchanged_and_b_everything_deletes_only_b_s(
    api: TestClient, prober: Prober, alice: Tenant, bob: Tenant
) -> None:
    start = len(prober.log.leaks)
    # Given what B holds now
    own = len(api.get("/api/memories", params={"user_id": bob.name}).json()["memories"])

    # When B deletes everything of its own
    deleted = prober.as_bob.post("/api/memories/delete", json={"everything": True})

    # Then the count is B's own, and A still has every memory it had
    leaked = (
        deleted.status_code != 200 or deleted.json()["memories"] != own or prober._shows_secret(deleted, "")
    )
    prober.log.record("delete everything", f"{own} own -> {deleted.text[:200]}", leaked)
    assert _snapshot(api, alice) == sorted((m["id"], m["content"], m["version"]) for m in alice.memories)
    assert prober.log.leaks[start:] == []


# Naming A with B's key, and no key, a wrong one or a revoked one.


def _operations(alice: Tenant) -> list[tuple[str, str, dict[str, Any]]]:
    """Every /api operation, aimed at A's data by naming A (``user_id``)."""
    document_id = quote(next(iter(alice.documents)))
    memory_id = alice.memory_ids[0]
    named = {"params": {"user_id": alice.name}}
    return [
        ("POST", "/api/documents", {"json": {"user_id": alice.name, "id": "planted", "text": "Planted."}}),
        (
            "POST",
            "/api/documents",
            {"json": [{"text": "Mine."}, {"user_id": alice.name, "text": "Planted."}]},
        ),
        ("GET", f"/api/documents/{document_id}", named),
        ("PUT", f"/api/documents/{document_id}", {"json": {"user_id": alice.name, "text": "Overwritten."}}),
        ("DELETE", f"/api/documents/{document_id}", named),
        ("GET", "/api/memories", named),
        ("GET", f"/api/memories/{memory_id}", named),
        ("DELETE", f"/api/memories/{memory_id}", named),
        ("POST", "/api/memories/delete", {"json": {"user_id": alice.name, "everything": True}}),
        ("POST", "/api/memory/semantic-search", {"json": {"user_id": alice.name, "query": "secret recipe"}}),
        ("GET", "/api/status", named),
    ]


def test_b_s_key_naming_a_is_refused_on_every_operation(prober: Prober, alice: Tenant) -> None:
    start = len(prober.log.leaks)
    for method, url, kwargs in _operations(alice):
        response = prober.as_bob.request(method, url, **kwargs)
        prober.refused(
            "B's key naming A", response, unquote(url) + json.dumps(kwargs, ensure_ascii=False), (403,)
        )
    assert prober.log.leaks[start:] == []


def test_no_key_a_wrong_key_or_a_revoked_key_is_refused_on_every_operation(
    prober: Prober, alice: Tenant, bob: Tenant, keys: KeyMaker
) -> None:
    start = len(prober.log.leaks)
    # Given B's key revoked (engram keys revoke), and keys that were never made
    revoked = acting_as(keys, bob.name)
    from producers.client import EngramClient
    from producers.http.deps import authenticator
    from shared.models import utc_now

    operator = EngramClient()
    try:
        assert revoked.key_id is not None and operator.key_store().revoke_key(revoked.key_id, utc_now())
    finally:
        operator.close()
    authenticator().forget()
    live_key = keys(bob.name).key
    callers = {
        "no key": client_with(),
        "a revoked key": revoked.client,
        "a forged secret": client_with(live_key[:-4] + "AAAA"),
        "a key that was never made": client_with("egk_0123456789abcdef_" + "A" * 43),
        "not a key": client_with(**{"X-API-Key": f"alice-{alice.hex}"}),
    }
    for name, client in callers.items():
        for method, url, kwargs in _operations(alice):
            response = Acting(client, name).request(method, url, **kwargs)
            prober.refused(name, response, unquote(url) + json.dumps(kwargs, ensure_ascii=False), (401,))
    assert prober.log.leaks[start:] == []


def test_b_s_status_counts_only_b_s_own(prober: Prober, bob: Tenant) -> None:
    start = len(prober.log.leaks)
    response = prober.as_bob.get("/api/status")
    prober.sees_only_bob("status", response, "")
    body = response.json()
    leaked = body.get("user_id") != bob.name or body.get("memories", 0) > len(bob.memories) + 3
    prober.log.record("status", response.text[:200], leaked)
    assert prober.log.leaks[start:] == []
