"""The API fuzzed from its own OpenAPI document by schemathesis, in process over ASGI, against the
real stack: every generated request (valid and invalid ones, every operation) answered without a
5xx and as documented, by every check schemathesis has.

./ops/test runs a quick profile (ENGRAM_FUZZ_EXAMPLES per operation, 25 by default); ops/fuzz the
full one. The figures are printed at the end of the run.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from schemathesis.core.failures import Failure, FailureGroup

from shared.models import IDENTIFIER_FORMAT, READABLE_TEXT_FORMAT
from tests.integration.fuzz import EXAMPLES, TALLY
from tests.strategies import identifiers, readable_texts, rfc3339_moments

pytestmark = pytest.mark.integration

# What the formats of the OpenAPI document mean (shared/models.py), as the README states them.
schemathesis.openapi.format(IDENTIFIER_FORMAT, identifiers())
schemathesis.openapi.format(READABLE_TEXT_FORMAT, readable_texts())
# JSON Schema cannot bound a date-time: the document says the range in words, the fuzzer keeps to it.
schemathesis.openapi.format("date-time", rfc3339_moments())


@pytest.fixture(scope="module")
def api_schema(api: TestClient) -> Any:
    from producers.api import app

    return schemathesis.openapi.from_asgi("/openapi.json", app)


schema = schemathesis.pytest.from_fixture("api_schema")


def _record(response: Any, failures: list[Failure]) -> None:
    TALLY.requests += 1
    TALLY.statuses[response.status_code] += 1
    if response.status_code >= 500:
        TALLY.server_errors += 1
    for failure in failures:
        TALLY.failures[f"{failure.code} {failure.title}"] += 1


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_generated_request_is_answered_as_documented(case: Any) -> None:
    # Given a request generated from the OpenAPI document (valid, or invalid on purpose)
    # When it is sent to the app
    response = case.call()

    # Then no check fails: no 5xx, and status, content type, headers and body as documented
    try:
        case.validate_response(response)
    except FailureGroup as group:
        _record(response, list(group.exceptions))
        raise
    except Failure as failure:
        _record(response, [failure])
        raise
    _record(response, [])
