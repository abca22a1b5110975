"""The API fuzzed from its own OpenAPI document by schemathesis, in process over ASGI, against the
real stack: every generated request (valid and invalid ones, every operation) answered without a
5xx and as documented, by every check schemathesis has.

Each request carries one of the credentials a caller may have: the fuzz tenant's key (most), an
admin key naming a tenant, or none, a wrong one, a revoked one (which must be 401 on /api).

./ops/test runs a quick profile (ENGRAM_FUZZ_EXAMPLES per operation, 25 by default); ops/fuzz the
full one. The figures are printed at the end of the run.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import pytest
import redis
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.core.failures import Failure, FailureGroup

from shared.confusables import ascii_reading
from shared.models import IDENTIFIER_FORMAT, READABLE_TEXT_FORMAT
from tests.integration.fuzz import EXAMPLES, TALLY
from tests.integration.fuzz_judge import not_a_violation_as_sent
from tests.integration.support import APP_URL, KeyMaker, forget_failed_tries
from tests.strategies import identifiers, readable_texts, rfc3339_moments

pytestmark = pytest.mark.integration

# What the formats of the OpenAPI document mean (shared/models.py), as docs/reference/http-api.md states them.
# A tenant that reads as another, ASCII name ("¡ÀĂº㭍aĀÝû" as "¡ÀĂo㭍aĀÝû") is refused by a rule no
# JSON Schema can state (a 422, docs/operations/security.md; test_confusables.py checks it): the
# identifiers drawn as valid keep clear of those (about 6 in 100 of them), or an admin naming one
# is a "schema-valid request rejected".
schemathesis.openapi.format(IDENTIFIER_FORMAT, identifiers().filter(lambda name: ascii_reading(name) is None))
schemathesis.openapi.format(READABLE_TEXT_FORMAT, readable_texts())
# JSON Schema cannot bound a date-time: the document says the range in words, the fuzzer keeps to it.
schemathesis.openapi.format("date-time", rfc3339_moments())

# Who calls: mostly the fuzz tenant, so the routes behind the door are reached.
CALLERS = ["tenant"] * 5 + ["admin"] * 2 + ["anonymous", "wrong key", "revoked key"]
REFUSED = {"anonymous", "wrong key", "revoked key"}


@dataclass
class Credentials:
    tenant: str
    headers: dict[str, dict[str, str]]


@pytest.fixture(scope="module")
def credentials(keys: KeyMaker) -> Credentials:
    from producers.client import EngramClient
    from producers.http.deps import authenticator
    from shared.models import utc_now

    tenant = f"fuzz-{uuid.uuid4().hex[:10]}"
    revoked = keys(tenant)
    operator = EngramClient()
    try:
        assert operator.key_store().revoke_key(revoked.info.id, utc_now())
    finally:
        operator.close()
    authenticator().forget()
    bearer = {
        "tenant": keys(tenant).key,
        "admin": keys(None).key,
        "wrong key": "egk_0123456789abcdef_" + "A" * 43,
        "revoked key": revoked.key,
    }
    headers = {name: {"Authorization": f"Bearer {key}"} for name, key in bearer.items()}
    return Credentials(tenant, {**headers, "anonymous": {}})


@pytest.fixture(scope="module")
def api_schema(api: TestClient) -> Any:
    from producers.http.app import app

    return schemathesis.openapi.from_asgi("/openapi.json", app, headers={"Host": "localhost"})


schema = schemathesis.pytest.from_fixture("api_schema")


def _name_tenant(case: Any, tenant: str, always: bool) -> None:
    """Names ``tenant`` as ``user_id`` where a request may name one: always, or where it is absent."""
    takes_tenant = any(parameter.name == "user_id" for parameter in case.operation.query)
    if isinstance(case.query, dict) and takes_tenant and (always or case.query.get("user_id") is None):
        case.query["user_id"] = tenant
    body = case.body
    documents = body.get("documents") if isinstance(body, dict) and "documents" in body else None
    for item in documents if isinstance(documents, list) else body if isinstance(body, list) else [body]:
        # an n8n item (producers/http/n8n_items.py) holds its document under "json"
        document = item.get("json") if isinstance(item, dict) and "json" in item else item
        if isinstance(document, dict) and (always or document.get("user_id") is None):
            document["user_id"] = tenant


def _record(response: Any, failures: list[Failure]) -> None:
    TALLY.requests += 1
    TALLY.statuses[response.status_code] += 1
    if response.status_code >= 500:
        TALLY.server_errors += 1
    for failure in failures:
        TALLY.failures[f"{failure.code} {failure.title}"] += 1


@schema.parametrize()
@schema.given(data=st.data())
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_generated_request_is_answered_as_documented(
    case: Any, data: st.DataObject, credentials: Credentials, redis_client: redis.Redis
) -> None:
    # Given a request generated from the OpenAPI document (valid, or invalid on purpose), sent by
    # the fuzz tenant (naming itself or not), an admin naming it, or without a good key
    who = data.draw(st.sampled_from(CALLERS), label="caller")
    if case.meta is not None and case.meta.generation.mode.is_positive and who in ("tenant", "admin"):
        _name_tenant(case, credentials.tenant, always=data.draw(st.booleans(), label="name the tenant"))
    for header in ("Authorization", "X-API-Key"):
        (case.headers or {}).pop(header, None)

    # (each example a client of its own: the wrong key's earlier tries make a 429, which
    # test_auth.py checks through the app, where this test checks the 401 of each single try)
    forget_failed_tries(redis_client)

    # When it is sent to the app (in process: an error the app raises reaches here as the
    # exception, not as the 500 a served app would answer, and is counted as one)
    try:
        response = case.call(base_url=APP_URL, headers=credentials.headers[who])
    except Exception:
        TALLY.requests += 1
        TALLY.statuses[500] += 1
        TALLY.server_errors += 1
        raise

    # Then no check fails: no 5xx, and status, content type, headers and body as documented
    try:
        # Checks that send the request again (without the key, say) send it to the same host
        sent = {"base_url": APP_URL, "headers": credentials.headers[who]}
        case.validate_response(response, headers=credentials.headers[who], transport_kwargs=sent)
    except (FailureGroup, Failure) as found:
        failures = list(found.exceptions) if isinstance(found, FailureGroup) else [found]
        artifacts = [failure for failure in failures if not_a_violation_as_sent(case, response, failure)]
        for failure in artifacts:
            TALLY.not_violations.append(f"{case.method} {case.path}: {failure.message.strip()[:300]}")
        _record(response, [failure for failure in failures if failure not in artifacts])
        if len(artifacts) < len(failures):
            raise
    else:
        _record(response, [])
    # And without a good key, nothing under /api is answered but 401
    if who in REFUSED and case.path.startswith("/api"):
        assert response.status_code == 401, (who, response.status_code, response.text)
