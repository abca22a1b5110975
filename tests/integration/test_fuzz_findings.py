"""What the API fuzzer (test_fuzz_api.py) found, each now answered as the OpenAPI document says,
against the real app and stack."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient

from shared.settings import Settings
from shared.stores.neo4j import Neo4jStore
from tests.integration.support import APP_URL, DIMENSION, MODEL, cypher, wait_until_finished

pytestmark = pytest.mark.integration


def doc(tenant: str, **fields: Any) -> dict[str, Any]:
    return {"user_id": tenant, "id": "d", "text": "A perfectly fine sentence.", **fields}


def test_the_document_names_the_rules_its_types_cannot_say(api: TestClient) -> None:
    # Given the OpenAPI document
    spec = api.get("/openapi.json").json()
    document = spec["components"]["schemas"]["DocumentBody"]["properties"]

    # Then identifiers, readable text and bounded metadata text are told apart from any string
    assert document["user_id"]["anyOf"][0]["format"] == "identifier"  # optional: the key names it
    assert document["text"]["format"] == "readable-text"
    assert document["metadata"]["propertyNames"]["format"] == "identifier"
    # (pydantic writes the values' schema under the keys' pattern)
    values = next(iter(document["metadata"]["patternProperties"].values()))
    assert {"type": "string", "maxLength": 4096} in values["anyOf"]
    assert "+-18:00" in document["created_at"]["anyOf"][0]["description"]
    memory = spec["paths"]["/api/memories/{memory_id}"]["get"]["parameters"][0]
    assert memory["schema"]["format"] == "uuid"


@pytest.mark.parametrize("created_at", [0, 1700000000, 1.5, "1700000000", True])
def test_a_number_is_not_a_moment(api: TestClient, tenant: str, created_at: object) -> None:
    # Given a created_at that is a number (pydantic alone read it as seconds since 1970)
    # When it is posted, Then it is refused, as the document says a moment is date-time text
    response = api.post("/api/documents", json=doc(tenant, created_at=created_at))
    assert response.status_code == 422, response.text
    assert "created_at" in response.text
    listed = api.get("/api/memories", params={"user_id": tenant, "from_date": "0"})
    assert listed.status_code == 422, listed.text


def test_a_put_whose_body_names_another_document_is_a_documented_conflict(
    api: TestClient, tenant: str
) -> None:
    # Given a PUT whose body's id is not the path's
    response = api.put("/api/documents/mine", json=doc(tenant, id="other"))

    # Then it is a 409, documented on the operation, and nothing is written under either id
    assert response.status_code == 409, response.text
    assert "is not the path's" in response.json()["detail"]
    spec = api.get("/openapi.json").json()
    assert "409" in spec["paths"]["/api/documents/{document_id}"]["put"]["responses"]
    for document_id in ("mine", "other"):
        assert api.get(f"/api/documents/{document_id}", params={"user_id": tenant}).status_code == 404


def test_a_put_whose_body_names_the_same_document_is_taken(api: TestClient, tenant: str) -> None:
    response = api.put("/api/documents/mine", json=doc(tenant, id="mine"))

    assert response.status_code == 202, response.text
    wait_until_finished(api, tenant, ["mine"])


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/api/documents/some-id", "DELETE, GET, PUT"),
        ("/api/documents", "POST"),
        (f"/api/memories/{uuid.uuid4()}", "DELETE, GET"),
        ("/api/memories/delete", "POST"),
        ("/api/memory/semantic-search", "POST"),
    ],
)
def test_a_405_allows_every_method_of_its_path(api: TestClient, path: str, allowed: str) -> None:
    # Given a path several routes share (GET, PUT and DELETE of a document are three routes)
    # When a method none of them takes is sent
    response = api.request("OPTIONS", path)

    # Then the 405's Allow names them all, not only the first route's
    assert response.status_code == 405
    assert response.headers["allow"] == allowed


def test_memory_ids_in_the_path_are_uuids(api: TestClient, tenant: str) -> None:
    # "/api/memories/delete" was also GET and DELETE of a memory named "delete"
    assert api.get("/api/memories/delete", params={"user_id": tenant}).status_code == 405
    assert api.delete("/api/memories/not-a-uuid", params={"user_id": tenant}).status_code == 404
    missing = api.get(f"/api/memories/{uuid.uuid4()}", params={"user_id": tenant})
    assert missing.status_code == 404
    assert "UUID(" not in missing.json()["detail"]


@pytest.mark.parametrize(
    ("path", "field", "body"),
    [
        ("/api/documents", "importance", {"importance": False}),
        ("/api/documents", "confidence", {"confidence": "0.5"}),
        ("/api/memory/semantic-search", "threshold", {"query": "q", "threshold": False}),
        ("/api/memory/semantic-search", "top_k", {"query": "q", "top_k": True}),
        ("/api/memory/semantic-search", "top_k", {"query": "q", "top_k": "5"}),
        ("/api/memories/delete", "everything", {"everything": 0}),
    ],
)
def test_a_value_of_another_type_is_refused_not_converted(
    api: TestClient, tenant: str, path: str, field: str, body: dict[str, Any]
) -> None:
    # Given a body whose number or boolean is of another JSON type (pydantic alone read false as 0)
    payload = {**doc(tenant), **body} if path == "/api/documents" else {"user_id": tenant, **body}

    # When it is posted, Then it is refused naming the field, and nothing is written
    response = api.post(path, json=payload)
    assert response.status_code == 422, response.text
    assert field in response.text
    assert api.get("/api/documents/d", params={"user_id": tenant}).status_code == 404


def test_the_app_started_again_in_the_same_process_still_answers(api: TestClient, tenant: str) -> None:
    # Given the app's lifespan ran and ended once more (schemathesis' client does this): it closed
    # the stores' drivers, which the next requests then used
    from producers.http.app import app

    with TestClient(app, base_url=APP_URL, headers=api.headers) as other:
        assert other.get("/api/memories", params={"user_id": tenant}).status_code == 200

    # When the session's client asks again, Then it is answered from open drivers
    response = api.get("/api/memories", params={"user_id": tenant})
    assert response.status_code == 200, response.text


def test_an_empty_list_of_documents_is_refused_as_the_document_says(api: TestClient) -> None:
    spec = api.get("/openapi.json").json()
    body = spec["paths"]["/api/documents"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert {"type": "array", "minItems": 1} in [
        {k: v for k, v in form.items() if k in ("type", "minItems")} for form in body["oneOf"]
    ]
    assert api.post("/api/documents", json=[]).status_code == 422


def test_a_delete_with_no_filter_is_refused_as_the_document_says(api: TestClient, tenant: str) -> None:
    # Given the document's rule: a filter with a value, or everything
    spec = api.get("/openapi.json").json()
    assert len(spec["components"]["schemas"]["DeleteWhere"]["anyOf"]) == 2

    # When a delete names neither, Then it is refused
    for body in ({}, {"filters": {}}, {"filters": {"project_id": None}}, {"everything": False}):
        response = api.post("/api/memories/delete", json={"user_id": tenant, **body})
        assert response.status_code == 422, response.text
        assert "no filter given" in response.json()["detail"]


def _six_stores_at_once(settings: Settings, act: Callable[[Neo4jStore], None]) -> None:
    """``act`` on six store objects (six processes) released at the same moment."""
    stores = [Neo4jStore(settings) for _ in range(6)]
    start = threading.Barrier(len(stores))

    def released(store: Neo4jStore) -> None:
        start.wait()
        act(store)

    try:
        with ThreadPoolExecutor(len(stores)) as pool:
            list(pool.map(released, stores))
    finally:
        for store in stores:
            store.close()


def test_stores_claiming_a_new_store_at_once_leave_one_claim(settings: Settings, neo4j_driver: Any) -> None:
    # Given a store as new: no model claimed, no uniqueness constraint on the claim yet (the fuzz
    # run's first search and first write bootstrapped it at once: two claims, the constraint could
    # never be made, and every write failed from then on)
    cypher(neo4j_driver, "DROP CONSTRAINT engram_schema_id IF EXISTS")
    cypher(neo4j_driver, "MATCH (s:EngramSchema {id: 'embedding'}) DELETE s")

    # When six processes bootstrap it at the same moment
    _six_stores_at_once(settings, lambda store: store.bootstrap(MODEL, DIMENSION))

    # Then there is one claim, and the constraint that keeps it one
    claims = cypher(
        neo4j_driver, "MATCH (s:EngramSchema {id: 'embedding'}) RETURN s.embedding_model AS model"
    )
    assert claims == [{"model": MODEL}]
    constraints = cypher(
        neo4j_driver, "SHOW CONSTRAINTS YIELD name WHERE name = 'engram_schema_id' RETURN name"
    )
    assert constraints == [{"name": "engram_schema_id"}]


def _schema_claims(neo4j_driver: Any, name: str) -> int:
    rows = cypher(neo4j_driver, "MATCH (s:EngramSchema {id: $name}) RETURN count(s) AS n", name=name)
    return int(rows[0]["n"])


def _claim_constraint(neo4j_driver: Any) -> list[dict[str, Any]]:
    return cypher(neo4j_driver, "SHOW CONSTRAINTS YIELD name WHERE name = 'engram_schema_id' RETURN name")


def test_restores_starting_on_a_new_store_at_once_leave_one_checkpoint(
    settings: Settings, neo4j_driver: Any
) -> None:
    # Given a store as new (the full fuzz run: two admin restores on a fresh Neo4j each made the
    # restore's checkpoint before any bootstrap had made the constraint: two checkpoints, the
    # constraint could never be made, and every bootstrap and search failed from then on)
    cypher(neo4j_driver, "DROP CONSTRAINT engram_schema_id IF EXISTS")
    cypher(neo4j_driver, "MATCH (s:EngramSchema {id: 'restore:fuzz'}) DELETE s")

    def checkpoint(store: Neo4jStore) -> None:
        store.save_restore_state(
            "restore:fuzz",
            state="running",
            cursor=None,
            tenant=None,
            report="{}",
            total=0,
            done=0,
            started_at=None,
            now=None,
        )

    # When six restores save their first checkpoint at the same moment
    _six_stores_at_once(settings, checkpoint)

    # Then there is one checkpoint, and the constraint that keeps it one
    assert _schema_claims(neo4j_driver, "restore:fuzz") == 1
    assert _claim_constraint(neo4j_driver) == [{"name": "engram_schema_id"}]
    cypher(neo4j_driver, "MATCH (s:EngramSchema {id: 'restore:fuzz'}) DELETE s")


def test_a_store_wedged_by_twin_claims_heals_at_bootstrap(settings: Settings, neo4j_driver: Any) -> None:
    # Given a store an older version wedged: two nodes of one claim, so no constraint can be made
    cypher(neo4j_driver, "DROP CONSTRAINT engram_schema_id IF EXISTS")
    cypher(neo4j_driver, "MATCH (s:EngramSchema {id: 'restore:fuzz'}) DELETE s")
    cypher(
        neo4j_driver,
        "CREATE (:EngramSchema {id: 'restore:fuzz', state: 'done', updated_at: datetime('2026-01-01T00:00:00Z')}),"
        " (:EngramSchema {id: 'restore:fuzz', state: 'running', updated_at: datetime('2026-01-02T00:00:00Z')})",
    )

    # When a process bootstraps it
    store = Neo4jStore(settings)
    try:
        store.bootstrap(MODEL, DIMENSION)
        kept = store.restore_state("restore:fuzz")
    finally:
        store.close()

    # Then the twins are folded into the newest, and the constraint is made
    assert _schema_claims(neo4j_driver, "restore:fuzz") == 1
    assert kept is not None and kept["state"] == "running"
    assert _claim_constraint(neo4j_driver) == [{"name": "engram_schema_id"}]
    cypher(neo4j_driver, "MATCH (s:EngramSchema {id: 'restore:fuzz'}) DELETE s")


def test_the_same_document_twice_in_one_request_is_a_documented_conflict(
    api: TestClient, tenant: str
) -> None:
    # Given two documents of one request that are one document (same id, or same text and no id)
    for body in ([doc(tenant), doc(tenant, text="Another text.")], [{"user_id": tenant, "text": "0"}] * 2):
        # When posted, Then it is a 409, documented on the operation, and nothing is written
        response = api.post("/api/documents", json=body)
        assert response.status_code == 409, response.text
        assert "appears twice" in response.json()["detail"]
    spec = api.get("/openapi.json").json()
    assert "409" in spec["paths"]["/api/documents"]["post"]["responses"]
    assert api.get("/api/documents/d", params={"user_id": tenant}).status_code == 404


def test_a_whole_number_written_with_a_point_is_an_integer(api: TestClient, tenant: str) -> None:
    # JSON Schema's integer takes 5.0; so does the search
    response = api.post("/api/memory/semantic-search", json={"user_id": tenant, "query": "q", "top_k": 5.0})
    assert response.status_code == 200, response.text


def test_the_document_bounds_top_k_as_the_search_does(api: TestClient, tenant: str) -> None:
    # top_k's minimum was written as "ge", which no JSON Schema reader knows: -2391 looked valid
    spec = api.get("/openapi.json").json()
    top_k = spec["components"]["schemas"]["SearchBody"]["properties"]["top_k"]["anyOf"][0]
    assert top_k == {"type": "integer", "minimum": 1}
    response = api.post("/api/memory/semantic-search", json={"user_id": tenant, "query": "q", "top_k": -2391})
    assert response.status_code == 422


def test_a_restore_takes_booleans_as_booleans_only(api: TestClient) -> None:
    # The full fuzz run: {"fresh": 0, "dry_run": 0} started a restore; the document says boolean
    for body in ({"dry_run": 1}, {"dry_run": "true"}, {"dry_run": True, "fresh": 0}, {"dry_run": "yes"}):
        response = api.post("/api/admin/restore", json=body)
        assert response.status_code == 422, (body, response.text)


def test_query_parameters_named_together_as_a_violation_are_judged_as_sent() -> None:
    # The full fuzz run: "parameters `tag`, `session_id` in query" (session_id drawn as an array
    # of one, tag as false) was counted, though what was sent is two valid identifiers
    from types import SimpleNamespace

    from schemathesis.core.failures import AcceptedNegativeData

    from tests.integration.fuzz_judge import not_a_violation_as_sent

    message = (
        "Invalid data should have been rejected\nExpected: 400, 422\n"
        "Invalid component: parameters `tag`, `session_id` in query\n"
        "  - violates `anyOf` at /properties/tag\n"
        "  - violates `type` at /properties/session_id/anyOf/1 (was null, became array)\n"
    )
    failure = AcceptedNegativeData(
        operation="GET /api/memories", message=message, status_code=200, expected_statuses=["422"]
    )
    case = SimpleNamespace(query={"tag": False, "session_id": ["s1"]})

    def sent(query: str) -> SimpleNamespace:
        return SimpleNamespace(request=SimpleNamespace(url=f"http://localhost/api/memories?{query}"))

    assert not_a_violation_as_sent(case, sent("session_id=s1&tag=false"), failure)
    # and one sent as no valid identifier is still a violation
    assert not not_a_violation_as_sent(case, sent("session_id=%20s1&tag=false"), failure)


def test_a_query_parameter_named_as_a_violation_but_never_sent_is_judged_as_absent() -> None:
    # The full fuzz run: GET /api/memories?memory_type=true was counted, its violation naming
    # memory_type (drawn as true) and project_id (drawn as an empty array, which puts nothing on
    # the wire). What was sent is one memory type, a free identifier like any other, and no
    # project_id, which the operation does not require: valid as sent, and rightly a 200.
    from types import SimpleNamespace

    import httpx
    import schemathesis
    from schemathesis.core.failures import AcceptedNegativeData

    from producers.http.app import app
    from tests.integration.fuzz_judge import not_a_violation_as_sent

    message = (
        "Invalid data should have been rejected\nExpected: 400, 422\n"
        "Invalid component: parameters `memory_type`, `project_id` in query\n"
        "  - violates `anyOf` at /properties/memory_type\n"
        "  - violates `type` at /properties/project_id/anyOf/0 (was string, became array)\n"
    )
    failure = AcceptedNegativeData(
        operation="GET /api/memories", message=message, status_code=200, expected_statuses=["422"]
    )
    operation = schemathesis.openapi.from_dict(app.openapi())["/api/memories"]["GET"]

    def judged(query: dict[str, Any]) -> bool:
        case = operation.Case(query=query)
        sent = case.as_transport_kwargs(base_url=APP_URL)
        request = httpx.Request(sent["method"], sent["url"], params=sent["params"])
        return not_a_violation_as_sent(case, SimpleNamespace(request=request), failure)

    assert judged({"memory_type": True, "project_id": []})
    assert judged({"memory_type": [True]})  # project_id not drawn at all: absent as well
    assert judged({"memory_type": [], "project_id": []})  # neither sent: a listing of everything
    # and a value sent that is no identifier is still a violation
    assert not judged({"memory_type": " true", "project_id": []})
    # and a parameter the operation requires is a violation when it never reached the wire
    required = SimpleNamespace(
        operation=SimpleNamespace(query=[SimpleNamespace(name="project_id", is_required=True)]),
        query={"memory_type": True, "project_id": []},
    )
    wire = SimpleNamespace(request=SimpleNamespace(url=f"{APP_URL}/api/memories?memory_type=true"))
    assert not not_a_violation_as_sent(required, wire, failure)


def test_a_query_parameter_named_in_the_query_component_is_judged_as_sent() -> None:
    # The second full fuzz run: GET /api/status?user_id=-5 was counted, its violation written as
    # "query: violates `anyOf` at /properties/user_id" (user_id drawn as the number -5) beside the
    # caller's Authorization header. What was sent is the tenant "-5", a valid identifier: a 200.
    from types import SimpleNamespace

    from schemathesis.core.failures import AcceptedNegativeData

    from tests.integration.fuzz_judge import not_a_violation_as_sent

    message = (
        "Invalid data should have been rejected\nExpected: 400, 422\nInvalid component:\n"
        "  - query: violates `anyOf` at /properties/user_id\n"
        "  - header: violates `format` at /properties/Authorization\n"
    )
    failure = AcceptedNegativeData(
        operation="GET /api/status", message=message, status_code=200, expected_statuses=["422"]
    )
    case = SimpleNamespace(query={"user_id": -5}, operation=SimpleNamespace(query=[]))

    def sent(query: str) -> SimpleNamespace:
        return SimpleNamespace(request=SimpleNamespace(url=f"{APP_URL}/api/status?{query}"))

    assert not_a_violation_as_sent(case, sent("user_id=-5"), failure)
    # and a value sent that is no identifier is still a violation
    assert not not_a_violation_as_sent(case, sent("user_id=%20-5"), failure)
    # and a body part beside it is judged as before: a violation
    body = message + "  - body: violates `anyOf` at /properties/token_budget\n"
    with_body = AcceptedNegativeData(
        operation="GET /api/status", message=body, status_code=200, expected_statuses=["422"]
    )
    assert not not_a_violation_as_sent(case, sent("user_id=-5"), with_body)


PATHOLOGICAL = ("1, " * 2731)[:8192], ("1 may " * 1400)[:8192]


@pytest.mark.parametrize(
    "query",
    ["in December 9999", "what happened in 9999", "on 1 January 0001", *PATHOLOGICAL],
    ids=["december-9999", "in-9999", "year-1", "8kb-1-comma", "8kb-1-may"],
)
def test_a_query_naming_a_date_no_window_holds_or_8kb_of_dates_is_searched_promptly(
    api: TestClient, tenant: str, query: str
) -> None:
    # Given a warm query worker (its first search loads the model: past the timeout when busy)
    deadline = time.monotonic() + 90
    while True:
        warm = api.post("/api/memory/semantic-search", json={"user_id": tenant, "query": "warm up"})
        if warm.status_code != 504 or time.monotonic() > deadline:
            break
    assert warm.status_code == 200, warm.text
    started = time.monotonic()
    plain = api.post("/api/memory/semantic-search", json={"user_id": tenant, "query": "what we planned"})
    usual = time.monotonic() - started
    assert plain.status_code == 200, plain.text

    # When a query names a date past what a window holds (a 500 with the key in the log), or
    # is 8 KB of words that each could start a date (seconds of the date parser, twice)
    started = time.monotonic()
    response = api.post("/api/memory/semantic-search", json={"user_id": tenant, "query": query})
    took = time.monotonic() - started

    # Then it is an answer, as any other query's, and about as prompt (it took 5-13 s, twice the
    # parse; a shared machine's noise allowed for)
    assert response.status_code == 200, response.text
    assert response.json()["count"] == 0
    assert took < max(3 * usual, 2.5), (took, usual)
